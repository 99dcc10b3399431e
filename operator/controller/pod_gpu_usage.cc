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
  const std::vector<Usage> usages = usage_.Values(pods, [&](const nlohmann::json& pod) {
    Usage usage;
    const std::string phase = pod["status"].value("phase", "");
    if (phase != "Succeeded" && phase != "Failed") {
      usage.node = pod["spec"].value("nodeName", "");
      usage.gpus = RequestedGpus(pod, resource_);
    }
    return usage;
  });
  for (const Usage& usage : usages) {
    if (!usage.node.empty()) used[usage.node] += usage.gpus;
  }
  return used;
}

}  // namespace fulcrum::controller
