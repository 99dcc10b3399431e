// An in-memory PodReferences for the tests: Secrets and ConfigMaps by
// namespace/name, tokens that record how they were requested.
#pragma once

#include <absl/strings/escaping.h>

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

class FakePodReferences : public PodReferences {
 public:
  struct TokenRequest {
    std::string ns;
    std::string service_account;
    std::vector<std::string> audiences;
    std::int64_t expiration_seconds = 0;
    std::string pod_name;
    std::string pod_uid;
  };

  // Stores the Secret as the API returns it: `data` base64-encoded.
  void AddSecret(const std::string& ns, const std::string& name,
                 const std::map<std::string, std::string>& plain) {
    nlohmann::json data = nlohmann::json::object();
    for (const auto& [key, value] : plain) data[key] = absl::Base64Escape(value);
    secrets_[ns + "/" + name] = {{"metadata", {{"name", name}, {"namespace", ns}}}, {"data", data}};
  }

  void AddConfigMap(const std::string& ns, const std::string& name,
                    const std::map<std::string, std::string>& data,
                    const std::map<std::string, std::string>& binary_data = {}) {
    nlohmann::json object = {{"metadata", {{"name", name}, {"namespace", ns}}}, {"data", data}};
    if (!binary_data.empty()) {
      nlohmann::json encoded = nlohmann::json::object();
      for (const auto& [key, value] : binary_data) encoded[key] = absl::Base64Escape(value);
      object["binaryData"] = encoded;
    }
    config_maps_[ns + "/" + name] = std::move(object);
  }

  // A claim bound to `volume` (empty: Pending), and a PersistentVolume with `source`
  // ({"hostPath": {...}} or {"local": {...}}).
  void AddClaim(const std::string& ns, const std::string& name, const std::string& volume) {
    nlohmann::json claim = {{"metadata", {{"name", name}, {"namespace", ns}}},
                            {"spec", nlohmann::json::object()},
                            {"status", {{"phase", volume.empty() ? "Pending" : "Bound"}}}};
    if (!volume.empty()) claim["spec"]["volumeName"] = volume;
    claims_[ns + "/" + name] = std::move(claim);
  }
  void AddPersistentVolume(const std::string& name, nlohmann::json source) {
    volumes_["/" + name] = {{"metadata", {{"name", name}}}, {"spec", std::move(source)}};
  }

  void SetRawSecret(const std::string& ns, const std::string& name, nlohmann::json object) {
    secrets_[ns + "/" + name] = std::move(object);
  }

  // Every read fails with this error while it is set (an API server that is down).
  void FailReadsWith(Error error) { failure_ = std::move(error); }

  void SetToken(std::string token) { token_ = std::move(token); }
  const std::vector<TokenRequest>& token_requests() const { return token_requests_; }

  Result<nlohmann::json> Secret(std::string_view ns, std::string_view name) override {
    return Find(secrets_, "Secret", ns, name);
  }
  Result<nlohmann::json> ConfigMap(std::string_view ns, std::string_view name) override {
    return Find(config_maps_, "ConfigMap", ns, name);
  }
  Result<nlohmann::json> PersistentVolumeClaim(std::string_view ns,
                                               std::string_view name) override {
    return Find(claims_, "PersistentVolumeClaim", ns, name);
  }
  Result<nlohmann::json> PersistentVolume(std::string_view name) override {
    return Find(volumes_, "PersistentVolume", "", name);
  }
  Result<std::string> ServiceAccountToken(std::string_view ns, std::string_view service_account,
                                          const std::vector<std::string>& audiences,
                                          std::int64_t expiration_seconds,
                                          std::string_view pod_name,
                                          std::string_view pod_uid) override {
    if (failure_) return *failure_;
    token_requests_.push_back(TokenRequest{std::string(ns), std::string(service_account), audiences,
                                           expiration_seconds, std::string(pod_name),
                                           std::string(pod_uid)});
    return token_;
  }

 private:
  Result<nlohmann::json> Find(const std::map<std::string, nlohmann::json>& objects,
                              const std::string& kind, std::string_view ns,
                              std::string_view name) const {
    if (failure_) return *failure_;
    auto found = objects.find(std::string(ns) + "/" + std::string(name));
    if (found == objects.end()) {
      return MakeError(ErrorCode::kNotFound,
                       kind + " " + std::string(ns) + "/" + std::string(name) + " not found");
    }
    return found->second;
  }

  std::map<std::string, nlohmann::json> secrets_;
  std::map<std::string, nlohmann::json> config_maps_;
  std::map<std::string, nlohmann::json> claims_;
  std::map<std::string, nlohmann::json> volumes_;
  std::optional<Error> failure_;
  std::string token_ = "token-1";
  std::vector<TokenRequest> token_requests_;
};

}  // namespace fulcrum::local_node
