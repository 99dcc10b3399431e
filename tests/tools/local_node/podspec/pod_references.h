// The API objects a pod's spec refers to (Secrets, ConfigMaps, service-account
// tokens, PersistentVolumeClaims and their PersistentVolumes), read through this small interface so
// that building a container's environment and volumes is plain logic, testable without an API
// server. The agent implements it with API reads, as kubelet does.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace fulcrum::local_node {

class PodReferences {
 public:
  virtual ~PodReferences() = default;
  // The object as the API returns it; an Error with ErrorCode::kNotFound when it does not exist.
  virtual Result<nlohmann::json> Secret(std::string_view ns, std::string_view name) = 0;
  virtual Result<nlohmann::json> ConfigMap(std::string_view ns, std::string_view name) = 0;
  // A claim, and the volume it is bound to (persistentVolumeClaim volumes).
  virtual Result<nlohmann::json> PersistentVolumeClaim(std::string_view ns,
                                                       std::string_view name) = 0;
  virtual Result<nlohmann::json> PersistentVolume(std::string_view name) = 0;
  // A token for `service_account` (the TokenRequest API), bound to the pod.
  virtual Result<std::string> ServiceAccountToken(std::string_view ns,
                                                  std::string_view service_account,
                                                  const std::vector<std::string>& audiences,
                                                  std::int64_t expiration_seconds,
                                                  std::string_view pod_name,
                                                  std::string_view pod_uid) = 0;
};

// What the downward API shows of a pod that is not in its object until the
// agent assigns it: the addresses.
struct PodRuntimeFacts {
  std::string pod_ip;
  std::string host_ip;
};

}  // namespace fulcrum::local_node
