#include "operator/controller/pod_gpu_usage.h"

#include <nlohmann/json.hpp>

namespace fulcrum::controller {

int RequestedGpus(const nlohmann::json& pod, const std::string& resource) {
  int total = 0;
  for (const nlohmann::json& container : pod["spec"].value("containers", nlohmann::json::array())) {
    const nlohmann::json requests = container.value("resources", nlohmann::json::object())
                                        .value("requests", nlohmann::json::object());
    if (!requests.contains(resource)) continue;
    const nlohmann::json& quantity = requests[resource];
    try {
      total += quantity.is_string() ? std::stoi(quantity.get<std::string>()) : quantity.get<int>();
    } catch (...) {
    }
  }
  return total;
}

std::map<std::string, int> PodGpuUsage::UsedGpus(const std::vector<kube::CachedObject>& pods) {
  std::map<std::string, int> used;
  std::unordered_map<std::string, Usage> current;
  current.reserve(pods.size());
  std::lock_guard lock(mutex_);
  for (const kube::CachedObject& cached : pods) {
    auto known = by_uid_.find(cached.uid());
    Usage usage;
    if (known != by_uid_.end() && known->second.resource_version == cached.resource_version()) {
      usage = std::move(known->second);
    } else {
      const nlohmann::json pod = cached.ToJson();
      ++decoded_;
      const std::string phase = pod["status"].value("phase", "");
      usage.resource_version = cached.resource_version();
      if (phase != "Succeeded" && phase != "Failed") {
        usage.node = pod["spec"].value("nodeName", "");
        usage.gpus = RequestedGpus(pod, resource_);
      }
    }
    if (!usage.node.empty()) used[usage.node] += usage.gpus;
    current.emplace(cached.uid(), std::move(usage));
  }
  by_uid_ = std::move(current);  // pods gone from the cache are forgotten
  return used;
}

uint64_t PodGpuUsage::decoded() const {
  std::lock_guard lock(mutex_);
  return decoded_;
}

}  // namespace fulcrum::controller
