// Helpers shared by the client's integration tests: clients for the test
// cluster's kubeconfigs, throwaway namespaces, and waiting for conditions.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "operator/kube/client/api_client.h"
#include "operator/kube/config/kubeconfig.h"
#include "tests/support/polling.h"
#include "tests/support/test_cluster.h"

namespace fulcrum::kube::testing {

inline std::shared_ptr<ApiClient> ClientFor(const std::string& kubeconfig,
                                            RestOptions options = {}) {
  auto config = LoadKubeconfig(kubeconfig);
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  if (!config.ok()) return nullptr;
  auto rest = RestClient::Create(*config, options);
  EXPECT_TRUE(rest.ok()) << rest.error().ToString();
  if (!rest.ok()) return nullptr;
  return std::make_shared<ApiClient>(std::shared_ptr<RestClient>(std::move(rest).value()));
}

inline std::shared_ptr<ApiClient> AdminClient(RestOptions options = {}) {
  options.qps = 200;
  options.burst = 400;
  return ClientFor(fulcrum::testing::Cluster().kubeconfig(), options);
}

// Creates namespace `name` for one test.
inline void CreateNamespace(ApiClient& client, const std::string& name) {
  auto created =
      client.Create(resources::Namespaces(), "",
                    {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  ASSERT_TRUE(created.ok()) << created.error().ToString();
}

// Polls `condition` every 50 ms until it holds or `timeout` passes. Generous
// timeouts: the machine is shared and slow; a pass is fast anyway.
inline bool WaitFor(const std::function<bool()>& condition,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  return fulcrum::testing::WaitUntil(condition, timeout);
}

inline nlohmann::json ConfigMap(const std::string& ns, const std::string& name,
                                nlohmann::json data = nlohmann::json::object(),
                                nlohmann::json labels = nlohmann::json::object()) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", labels}}},
          {"data", data}};
}

}  // namespace fulcrum::kube::testing
