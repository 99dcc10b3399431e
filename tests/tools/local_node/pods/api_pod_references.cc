#include "tests/tools/local_node/pods/api_pod_references.h"

namespace fulcrum::local_node {

Result<nlohmann::json> ApiPodReferences::Secret(std::string_view ns, std::string_view name) {
  return client_->Get(kube::resources::Secrets(), ns, name);
}

Result<nlohmann::json> ApiPodReferences::ConfigMap(std::string_view ns, std::string_view name) {
  return client_->Get(kube::resources::ConfigMaps(), ns, name);
}

Result<nlohmann::json> ApiPodReferences::PersistentVolumeClaim(std::string_view ns,
                                                               std::string_view name) {
  return client_->Get(kube::resources::PersistentVolumeClaims(), ns, name);
}

Result<nlohmann::json> ApiPodReferences::PersistentVolume(std::string_view name) {
  return client_->Get(kube::resources::PersistentVolumes(), "", name);
}

Result<std::string> ApiPodReferences::ServiceAccountToken(std::string_view ns,
                                                          std::string_view service_account,
                                                          const std::vector<std::string>& audiences,
                                                          std::int64_t expiration_seconds,
                                                          std::string_view pod_name,
                                                          std::string_view pod_uid) {
  nlohmann::json request = {
      {"apiVersion", "authentication.k8s.io/v1"},
      {"kind", "TokenRequest"},
      {"spec",
       {{"expirationSeconds", expiration_seconds},
        {"boundObjectRef",
         {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", pod_name}, {"uid", pod_uid}}}}}};
  if (!audiences.empty()) request["spec"]["audiences"] = audiences;
  auto response = client_->CreateSubresource(kube::resources::ServiceAccounts(), ns,
                                             service_account, "token", request);
  if (!response.ok()) return response.error();
  const auto status = response->value("status", nlohmann::json::object());
  if (!status.contains("token") || !status["token"].is_string()) {
    return MakeError(ErrorCode::kInternal, "the TokenRequest for service account " +
                                               std::string(service_account) + " returned no token");
  }
  return status["token"].get<std::string>();
}

}  // namespace fulcrum::local_node
