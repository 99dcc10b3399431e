// GPUs taken on each node by the trainer pods in the informer cache, for placement (free worker
// slots). Every reconcile needs the sum over every trainer pod in the cluster, but decoding each
// cached pod on each reconcile made the controller's CPU grow with jobs × pods (200 jobs of 8
// workers: 1,600 pods decoded per reconcile, two reconcile threads busy; docs/benchmarks.md,
// "Operator at scale"). So each pod is decoded once per resourceVersion and its node and GPUs
// are remembered (kube::DecodedObjects); a reconcile then only walks the cache's identities.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "operator/kube/cache/cached_object.h"
#include "operator/kube/cache/decoded_objects.h"

namespace fulcrum::controller {

class PodGpuUsage {
 public:
  explicit PodGpuUsage(std::string gpu_resource) : resource_(std::move(gpu_resource)) {}

  // GPUs requested by the scheduled, unfinished pods in `pods`, by node. Pods not in `pods`
  // are forgotten. Safe to call from several reconcile threads at once.
  std::map<std::string, int> UsedGpus(const std::vector<kube::CachedObject>& pods);
  // How many pod versions were decoded so far (tests: unchanged pods are not decoded again).
  uint64_t decoded() const { return usage_.decoded(); }

 private:
  struct Usage {
    std::string node;  // "" while unscheduled or once finished: takes nothing
    int gpus = 0;
  };
  const std::string resource_;
  kube::DecodedObjects<Usage> usage_;
};

// GPUs of `resource` the pod's containers request.
int RequestedGpus(const nlohmann::json& pod, const std::string& resource);

}  // namespace fulcrum::controller
