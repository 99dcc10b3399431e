// RestClient behaviour that a real API server will not show on demand,
// against a scripted HTTP server on loopback: Retry-After on 429, giving up
// after max_retries, and an HTTP 410 on a watch request.
#include "operator/kube/rest/rest_client.h"

#include "operator/kube/client/api_client.h"
#include "tests/operator/kube/loopback_servers.h"

namespace fulcrum::kube {
namespace {

using testing::kTooManyRequestsStatus;
using testing::ScriptedServer;

std::unique_ptr<RestClient> ClientOf(const ScriptedServer& server, int max_retries = 10) {
  ClusterConfig config;
  config.server = server.url();
  RestOptions options;
  options.max_retries = max_retries;
  auto client = RestClient::Create(config, options);
  EXPECT_TRUE(client.ok()) << client.error().ToString();
  return std::move(client).value();
}

TEST(RestClient, HonoursRetryAfterOn429) {
  ScriptedServer server({{429, kTooManyRequestsStatus, "1"}, {200, R"({"kind":"Namespace"})", ""}});
  ASSERT_TRUE(server.ok());
  auto client = ClientOf(server);
  const auto start = std::chrono::steady_clock::now();
  auto result = client->Get("/api/v1/namespaces/default");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.error().ToString();
  EXPECT_EQ((*result)["kind"], "Namespace");
  EXPECT_EQ(server.requests(), 2);
  EXPECT_GE(waited, 0.95) << "retried before Retry-After";
}

TEST(RestClient, GivesUpWithResourceExhaustedAfterMaxRetries) {
  ScriptedServer server({{429, kTooManyRequestsStatus, "1"}});
  ASSERT_TRUE(server.ok());
  auto client = ClientOf(server, /*max_retries=*/1);
  auto result = client->Get("/api/v1/namespaces/default");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kResourceExhausted) << result.error().ToString();
  EXPECT_EQ(server.requests(), 2);
}

TEST(RestClient, HttpGoneOnAWatchIsExpired) {
  ScriptedServer server(
      {{410,
        R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410})",
        ""}});
  ASSERT_TRUE(server.ok());
  ApiClient api(ClientOf(server));
  ListOptions options;
  options.resource_version = "5";
  auto watch = api.Watch(resources::Pods(), "default", options);
  ASSERT_FALSE(watch.ok());
  EXPECT_EQ(watch.error().code, ErrorCode::kExpired) << watch.error().ToString();
}

}  // namespace
}  // namespace fulcrum::kube
