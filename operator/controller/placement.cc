#include "operator/controller/placement.h"

#include <algorithm>

namespace fulcrum::controller {

bool Active(const WorkerPod& pod) {
  return !pod.terminating && !Ended(pod.phase);
}

JobSpec PlacementSpec(const JobSpec& spec, const std::vector<WorkerPod>& own_pods,
                      const std::map<std::string, std::string>& product_of) {
  if (spec.max_workers_per_product.empty()) return spec;
  std::map<std::string, int> placed;
  for (const WorkerPod& pod : own_pods) {
    if (!Active(pod)) continue;
    if (const auto node = product_of.find(pod.node); node != product_of.end()) {
      ++placed[node->second];
    }
  }
  JobSpec placement = spec;
  for (const auto& [product, cap] : spec.max_workers_per_product) {
    // A product at its cap takes no new worker: new pods are not allowed there at all.
    if (placed[product] >= cap) placement.gpu_selector.denied.push_back(product);
  }
  return placement;
}

int FreeSlots(const JobSpec& placement, const std::vector<WorkerPod>& own_pods,
              const std::set<std::string>& excluded, const std::vector<GpuNode>& candidates,
              const std::map<std::string, int>& used_gpus,
              const std::map<std::string, std::string>& product_of) {
  std::map<std::string, int> own_on_node;
  int waiting = 0;
  for (const WorkerPod& pod : own_pods) {
    if (!Active(pod)) continue;
    if (pod.node.empty()) {
      ++waiting;
    } else {
      ++own_on_node[pod.node];
    }
  }
  // gpuSelector.maxWorkersPerProduct: what is left of each cap after the job's placed workers.
  std::map<std::string, int> cap_left = placement.max_workers_per_product;
  for (const auto& [node, count] : own_on_node) {
    const auto product = product_of.find(node);
    if (product != product_of.end() && cap_left.contains(product->second)) {
      cap_left[product->second] -= count;
    }
  }
  int free = 0;
  for (const GpuNode& node : candidates) {
    if (excluded.contains(node.name)) continue;
    int slots = 0;
    if (placement.gpus_per_worker > 0) {
      const auto used = used_gpus.find(node.name);
      const int taken = used == used_gpus.end() ? 0 : used->second;
      slots = std::max(0, (node.allocatable_gpus - taken) / placement.gpus_per_worker);
    } else if (!own_on_node.contains(node.name)) {
      slots = 1;
    }
    if (const auto cap = cap_left.find(node.product); cap != cap_left.end()) {
      slots = std::clamp(cap->second, 0, slots);
      cap->second -= slots;
    }
    free += slots;
  }
  return free - waiting;
}

std::map<std::string, int> UnsupportedProducts(const std::vector<GpuNode>& nodes, int minimum) {
  std::map<std::string, int> unsupported;
  for (const GpuNode& node : nodes) {
    if (!node.product.empty() && node.compute_capability && *node.compute_capability < minimum) {
      unsupported[node.product] = *node.compute_capability;
    }
  }
  return unsupported;
}

JobSpec WithoutUnsupported(JobSpec spec, const std::map<std::string, int>& unsupported) {
  for (const auto& [product, capability] : unsupported) {
    spec.gpu_selector.denied.push_back(product);
  }
  return spec;
}

std::vector<std::pair<std::string, double>> ProductSpeeds(const std::vector<GpuNode>& candidates) {
  std::vector<std::pair<std::string, double>> speeds;
  for (const GpuNode& node : candidates) {
    if (!node.prior_speed || node.product.empty()) continue;
    const bool seen = std::any_of(speeds.begin(), speeds.end(),
                                  [&](const auto& known) { return known.first == node.product; });
    if (!seen) speeds.emplace_back(node.product, *node.prior_speed);
  }
  return speeds;
}

}  // namespace fulcrum::controller
