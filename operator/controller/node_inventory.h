// The operator's view of the cluster's GPU nodes, kept current by a Node informer: for each
// node what gpu_node.h reads, and which nodes a new worker of a job may go to, fastest product
// first (the catalog's prior). Thread-safe: the informer writes, reconcilers read.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "operator/controller/gpu_node.h"

namespace fulcrum::kube {
class Informer;
}

namespace fulcrum::controller {

// A job's gpuSelector: products allowed (empty: any) and denied.
struct GpuSelector {
  std::vector<std::string> allowed;
  std::vector<std::string> denied;
  bool Admits(const std::string& product) const;
};

class NodeInventory {
 public:
  explicit NodeInventory(GpuLabelKeys keys = {},
                         std::vector<std::string> tolerated_taint_keys = {});

  // From the informer: a node as the server has it now (true if anything placement depends
  // on changed, or the node is new), or gone.
  bool Upsert(const nlohmann::json& node);
  void Remove(const std::string& name);

  std::optional<GpuNode> Get(const std::string& name) const;
  std::vector<GpuNode> Nodes() const;  // by name
  // Nodes a new worker may be placed on now (CanPlaceWorker), admitted by `selector`: the
  // fastest prior first, products the catalog does not know after them, then by name.
  std::vector<GpuNode> Candidates(int gpus_per_worker, const GpuSelector& selector) const;
  // Changes on every Upsert that changed something and every Remove that removed a node, so a
  // controller can tell that capacity may have appeared or gone.
  uint64_t version() const;

 private:
  GpuLabelKeys keys_;
  std::vector<std::string> tolerated_taint_keys_;
  mutable std::mutex mutex_;
  std::map<std::string, GpuNode> nodes_;
  uint64_t version_ = 0;
};

// Keeps `inventory` current from `informer` (a Node informer, not yet started); calls
// `on_change(node_name)` after each change that matters for placement.
void FeedInventory(kube::Informer& informer, NodeInventory& inventory,
                   std::function<void(const std::string& node)> on_change = {});

}  // namespace fulcrum::controller
