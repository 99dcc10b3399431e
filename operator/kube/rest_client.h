// HTTPS requests to one API server with the configured trust and credentials.
// Synchronous calls; each returns the decoded JSON body or a typed Error.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "operator/common/result.h"
#include "operator/kube/cluster_config.h"

namespace fulcrum::kube {

struct RestOptions {
  std::chrono::milliseconds request_timeout{30'000};
  std::string user_agent = "fulcrum/0.1";
};

class RestClient {
 public:
  // Fails if the TLS material in `config` cannot be loaded (the message says which).
  static Result<std::unique_ptr<RestClient>> Create(const ClusterConfig& config, RestOptions options = {});
  ~RestClient();
  RestClient(const RestClient&) = delete;
  RestClient& operator=(const RestClient&) = delete;

  // `path` is the absolute API path with query, e.g. "/api/v1/nodes?limit=500".
  Result<nlohmann::json> Get(std::string_view path);
  Result<nlohmann::json> Send(std::string_view method, std::string_view path, const nlohmann::json& body,
                              std::string_view content_type = "application/json");

  const ClusterConfig& config() const;

 private:
  struct Impl;
  explicit RestClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::kube
