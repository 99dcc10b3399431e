#include "operator/controller/node_inventory.h"

#include <algorithm>

#include "operator/kube/cache/informer.h"

namespace fulcrum::controller {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

}  // namespace

bool GpuSelector::Admits(const std::string& product) const {
  if (Contains(denied, product)) return false;
  return allowed.empty() || Contains(allowed, product);
}

NodeInventory::NodeInventory(GpuLabelKeys keys, std::vector<std::string> tolerated_taint_keys)
    : keys_(std::move(keys)), tolerated_taint_keys_(std::move(tolerated_taint_keys)) {}

bool NodeInventory::Upsert(const nlohmann::json& node) {
  GpuNode gpu = ReadGpuNode(node, keys_);
  std::lock_guard lock(mutex_);
  auto [it, inserted] = nodes_.try_emplace(gpu.name, gpu);
  if (!inserted && it->second == gpu) return false;  // e.g. only a heartbeat moved
  it->second = std::move(gpu);
  ++version_;
  return true;
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
  auto upsert = [&inventory, notify](const kube::CachedObject& node) {
    if (inventory.Upsert(node.ToJson())) notify(std::string(node.name()));
  };
  handler.on_add = upsert;
  handler.on_update = [upsert](const kube::CachedObject&, const kube::CachedObject& node) {
    upsert(node);
  };
  handler.on_delete = [&inventory, notify](const kube::CachedObject& node) {
    inventory.Remove(std::string(node.name()));
    notify(std::string(node.name()));
  };
  informer.AddEventHandler(std::move(handler));
}

}  // namespace fulcrum::controller
