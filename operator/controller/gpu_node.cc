#include "operator/controller/gpu_node.h"

#include <algorithm>
#include <charconv>

#include "operator/balancer/gpu_catalog.h"

namespace fulcrum::controller {
namespace {

// A whole number >= 0 from a label value or a resource quantity without suffix ("4").
std::optional<int64_t> WholeNumber(const std::string& text) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::string LabelOf(const nlohmann::json& node, const std::string& key) {
  const nlohmann::json* labels = nullptr;
  if (auto metadata = node.find("metadata"); metadata != node.end()) {
    if (auto found = metadata->find("labels"); found != metadata->end() && found->is_object())
      labels = &*found;
  }
  if (labels == nullptr) return "";
  const auto value = labels->find(key);
  return value != labels->end() && value->is_string() ? value->get<std::string>() : "";
}

}  // namespace

GpuNode ReadGpuNode(const nlohmann::json& node, const GpuLabelKeys& keys) {
  GpuNode gpu;
  gpu.name = node.value("/metadata/name"_json_pointer, std::string());
  gpu.product = LabelOf(node, keys.product);
  if (const std::string memory = LabelOf(node, keys.memory_mib); !memory.empty()) {
    if (std::optional<int64_t> mib = WholeNumber(memory)) {
      gpu.memory_bytes = *mib * (int64_t{1} << 20);
    } else {
      gpu.problems.push_back(keys.memory_mib + "=\"" + memory + "\" is not a whole number of MiB");
    }
  }
  if (const std::string count = LabelOf(node, keys.count); !count.empty()) {
    if (std::optional<int64_t> value = WholeNumber(count); value && *value <= 1024) {
      gpu.labelled_gpus = static_cast<int>(*value);
    } else {
      gpu.problems.push_back(keys.count + "=\"" + count + "\" is not a GPU count");
    }
  }
  const nlohmann::json allocatable =
      node.value("/status/allocatable"_json_pointer, nlohmann::json::object());
  if (auto quantity = allocatable.find(keys.resource);
      quantity != allocatable.end() && quantity->is_string()) {
    // Extended resources are whole numbers; anything else cannot be requested per GPU.
    if (std::optional<int64_t> value = WholeNumber(quantity->get<std::string>());
        value && *value <= 1024) {
      gpu.allocatable_gpus = static_cast<int>(*value);
    } else {
      gpu.problems.push_back("status.allocatable[" + keys.resource + "]=\"" +
                             quantity->get<std::string>() + "\" is not a GPU count");
    }
  }
  for (const nlohmann::json& condition :
       node.value("/status/conditions"_json_pointer, nlohmann::json::array())) {
    if (condition.value("type", "") == "Ready") gpu.ready = condition.value("status", "") == "True";
  }
  gpu.unschedulable = node.value("/spec/unschedulable"_json_pointer, false);
  for (const nlohmann::json& taint :
       node.value("/spec/taints"_json_pointer, nlohmann::json::array())) {
    gpu.taints.push_back(
        {taint.value("key", ""), taint.value("value", ""), taint.value("effect", "")});
  }
  if (!gpu.product.empty()) {
    if (std::optional<balancer::GpuProfile> profile = balancer::LookupGpu(gpu.product)) {
      gpu.prior_speed = profile->relative_speed;
      gpu.compute_capability = profile->compute_capability;
      if (gpu.memory_bytes == 0) gpu.memory_bytes = profile->memory_bytes;
    }
  }
  // The node's own word beats the catalog's (a product the catalog does not know, say).
  const std::string major = LabelOf(node, keys.compute_major);
  const std::string minor = LabelOf(node, keys.compute_minor);
  if (!major.empty()) {
    const std::optional<int64_t> major_number = WholeNumber(major);
    const std::optional<int64_t> minor_number = minor.empty() ? 0 : WholeNumber(minor);
    if (major_number && minor_number && *major_number < 100 && *minor_number < 10) {
      gpu.compute_capability = static_cast<int>(*major_number * 10 + *minor_number);
    } else {
      gpu.problems.push_back(keys.compute_major + "=\"" + major + "\", " + keys.compute_minor +
                             "=\"" + minor + "\" is not a compute capability");
    }
  }
  return gpu;
}

bool CanPlaceWorker(const GpuNode& node, int gpus_per_worker,
                    const std::vector<std::string>& tolerated_taint_keys) {
  if (!node.ready || node.unschedulable) return false;
  if (gpus_per_worker > 0 && (node.product.empty() || node.allocatable_gpus < gpus_per_worker))
    return false;
  return std::none_of(node.taints.begin(), node.taints.end(), [&](const Taint& taint) {
    const bool repels = taint.effect == "NoSchedule" || taint.effect == "NoExecute";
    return repels && std::find(tolerated_taint_keys.begin(), tolerated_taint_keys.end(),
                               taint.key) == tolerated_taint_keys.end();
  });
}

}  // namespace fulcrum::controller
