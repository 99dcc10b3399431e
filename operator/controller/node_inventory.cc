#include "operator/controller/node_inventory.h"

#include <algorithm>

#include "operator/kube/cache/informer.h"

namespace fulcrum::controller {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

// What placement depends on; a change elsewhere (a heartbeat's timestamps) is not a change.
bool SamePlacement(const GpuNode& a, const GpuNode& b) {
  auto taints = [](const GpuNode& node) {
    std::vector<std::string> all;
    for (const Taint& taint : node.taints)
      all.push_back(taint.key + "=" + taint.value + ":" + taint.effect);
    return all;
  };
  return a.product == b.product && a.memory_bytes == b.memory_bytes &&
         a.labelled_gpus == b.labelled_gpus && a.allocatable_gpus == b.allocatable_gpus &&
         a.ready == b.ready && a.unschedulable == b.unschedulable && taints(a) == taints(b) &&
         a.problems == b.problems;
}

}  // namespace

bool GpuSelector::Admits(const std::string& product) const {
  if (Contains(denied, product)) return false;
  return allowed.empty() || Contains(allowed, product);
}

NodeInventory::NodeInventory(GpuLabelKeys keys, std::vector<std::string> tolerated_taint_keys)
    : keys_(std::move(keys)), tolerated_taint_keys_(std::move(tolerated_taint_keys)) {}

GpuNode NodeInventory::Upsert(const nlohmann::json& node) {
  GpuNode gpu = ReadGpuNode(node, keys_);
  std::lock_guard lock(mutex_);
  auto [it, inserted] = nodes_.try_emplace(gpu.name, gpu);
  if (inserted || !SamePlacement(it->second, gpu)) {
    it->second = gpu;
    ++version_;
  }
  return gpu;
}

void NodeInventory::Remove(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (nodes_.erase(name) > 0) ++version_;
}

std::optional<GpuNode> NodeInventory::Get(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) return std::nullopt;
  return it->second;
}

std::vector<GpuNode> NodeInventory::Nodes() const {
  std::lock_guard lock(mutex_);
  std::vector<GpuNode> all;
  for (const auto& [name, node] : nodes_) all.push_back(node);
  return all;
}

std::vector<GpuNode> NodeInventory::Candidates(int gpus_per_worker,
                                               const GpuSelector& selector) const {
  std::vector<GpuNode> candidates;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [name, node] : nodes_) {
      if (!CanPlaceWorker(node, gpus_per_worker, tolerated_taint_keys_)) continue;
      if (gpus_per_worker > 0 && !selector.Admits(node.product)) continue;
      candidates.push_back(node);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const GpuNode& a, const GpuNode& b) {
    return a.prior_speed.value_or(-1.0) > b.prior_speed.value_or(-1.0);
  });
  return candidates;
}

uint64_t NodeInventory::version() const {
  std::lock_guard lock(mutex_);
  return version_;
}

void FeedInventory(kube::Informer& informer, NodeInventory& inventory,
                   std::function<void(const std::string& node)> on_change) {
  auto notify = [on_change](const std::string& name) {
    if (on_change) on_change(name);
  };
  kube::ResourceEventHandler handler;
  handler.on_add = [&inventory, notify](const kube::CachedObject& node) {
    inventory.Upsert(node.ToJson());
    notify(std::string(node.name()));
  };
  handler.on_update = [&inventory, notify](const kube::CachedObject&,
                                           const kube::CachedObject& node) {
    const uint64_t before = inventory.version();
    inventory.Upsert(node.ToJson());
    if (inventory.version() != before) notify(std::string(node.name()));
  };
  handler.on_delete = [&inventory, notify](const kube::CachedObject& node) {
    inventory.Remove(std::string(node.name()));
    notify(std::string(node.name()));
  };
  informer.AddEventHandler(std::move(handler));
}

}  // namespace fulcrum::controller
