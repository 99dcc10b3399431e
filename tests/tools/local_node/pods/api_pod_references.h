// PodReferences read from the API server, as kubelet reads them (a GET per
// start; kubelet's watch-based managers are a cache of the same).
#pragma once

#include <memory>

#include "operator/kube/client/api_client.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

class ApiPodReferences final : public PodReferences {
 public:
  explicit ApiPodReferences(std::shared_ptr<kube::ApiClient> client) : client_(std::move(client)) {}
  Result<nlohmann::json> Secret(std::string_view ns, std::string_view name) override;
  Result<nlohmann::json> ConfigMap(std::string_view ns, std::string_view name) override;
  Result<nlohmann::json> PersistentVolumeClaim(std::string_view ns, std::string_view name) override;
  Result<nlohmann::json> PersistentVolume(std::string_view name) override;
  Result<std::string> ServiceAccountToken(std::string_view ns, std::string_view service_account,
                                          const std::vector<std::string>& audiences,
                                          std::int64_t expiration_seconds,
                                          std::string_view pod_name,
                                          std::string_view pod_uid) override;

 private:
  std::shared_ptr<kube::ApiClient> client_;
};

}  // namespace fulcrum::local_node
