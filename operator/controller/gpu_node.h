// What the operator needs to know of one Node to place trainer workers on it: its GPU product,
// memory and count (NVIDIA GPU Feature Discovery's labels, or another vendor's under
// configured keys), its allocatable GPUs, readiness, taints and cordon, and the product's prior
// speed from the balancer's catalog (the first plan's estimate; measurements replace it).
// Pure: a Node object in, a value out.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::controller {

// Where a vendor's GPU facts live on a Node. Defaults: NVIDIA GPU Feature Discovery.
struct GpuLabelKeys {
  std::string product = "nvidia.com/gpu.product";
  std::string memory_mib = "nvidia.com/gpu.memory";  // MiB per GPU
  std::string count = "nvidia.com/gpu.count";
  std::string resource = "nvidia.com/gpu";  // the extended resource pods request
  // GPU Feature Discovery's compute capability; the catalog's where absent.
  std::string compute_major = "nvidia.com/gpu.compute.major";
  std::string compute_minor = "nvidia.com/gpu.compute.minor";
};

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, PreferNoSchedule, NoExecute
  bool operator==(const Taint&) const = default;
};

struct GpuNode {
  std::string name;
  std::string product;         // "" when the node has no product label
  int64_t memory_bytes = 0;    // per GPU; 0 when unknown (label absent or unreadable)
  int labelled_gpus = 0;       // the count label
  int allocatable_gpus = 0;    // status.allocatable[resource]
  bool ready = false;          // the Ready condition is True
  bool unschedulable = false;  // cordoned
  std::vector<Taint> taints;
  std::optional<double> prior_speed;  // relative to a V100; nullopt for products not in the catalog
  // major*10+minor from the node's labels, else the catalog's; nullopt when neither knows.
  std::optional<int> compute_capability;
  // Labels present but unreadable, e.g. "nvidia.com/gpu.memory=\"lots\" is not a whole number
  // of MiB": the operator reports them (Event, log) and uses what it can.
  std::vector<std::string> problems;
  // Everything above is read from the Node's labels, spec and a few status fields, never from
  // heartbeat timestamps: equal GpuNodes mean nothing placement depends on has changed.
  bool operator==(const GpuNode&) const = default;
};

GpuNode ReadGpuNode(const nlohmann::json& node, const GpuLabelKeys& keys = {});

// Whether a new worker asking for `gpus_per_worker` GPUs may be placed there now: Ready, not
// cordoned, enough allocatable GPUs (a GPU worker needs a product label too), and no
// NoSchedule/NoExecute taint other than those whose keys are in `tolerated_taint_keys`.
bool CanPlaceWorker(const GpuNode& node, int gpus_per_worker,
                    const std::vector<std::string>& tolerated_taint_keys);

}  // namespace fulcrum::controller
