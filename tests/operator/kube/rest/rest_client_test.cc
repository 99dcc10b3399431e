// RestClient behaviour that a real API server will not show on demand,
// against a scripted HTTP server on loopback: Retry-After on 429, giving up
// after max_retries, and an HTTP 410 on a watch request.
#include "operator/kube/rest/rest_client.h"

// gtest must come before cpprest, whose headers define a macro named U.
// clang-format off
#include <gtest/gtest.h>
#include <cpprest/http_listener.h>
// clang-format on

#include <atomic>
#include <deque>
#include <mutex>
#include <random>

#include "operator/kube/client/api_client.h"

namespace fulcrum::kube {
namespace {

using web::http::http_request;
using web::http::experimental::listener::http_listener;

struct Reply {
  int status;
  std::string body;
  std::string retry_after;
};

// Answers each request with the next scripted reply (the last one repeats).
class ScriptedServer {
 public:
  explicit ScriptedServer(std::deque<Reply> replies) : replies_(std::move(replies)) {
    std::mt19937 random(std::random_device{}());
    for (int attempt = 0; attempt < 20 && !listener_; ++attempt) {
      port_ = std::uniform_int_distribution<int>(20000, 60000)(random);
      try {
        auto listener =
            std::make_unique<http_listener>("http://127.0.0.1:" + std::to_string(port_));
        listener->support([this](http_request request) { Answer(request); });
        listener->open().wait();
        listener_ = std::move(listener);
      } catch (const std::exception&) {
        // Port taken: try another.
      }
    }
  }
  ~ScriptedServer() {
    if (listener_) listener_->close().wait();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int requests() const { return requests_; }
  bool ok() const { return listener_ != nullptr; }

 private:
  void Answer(http_request request) {
    Reply reply;
    {
      std::lock_guard lock(mutex_);
      ++requests_;
      reply = replies_.front();
      if (replies_.size() > 1) replies_.pop_front();
    }
    web::http::http_response response(static_cast<web::http::status_code>(reply.status));
    if (!reply.retry_after.empty()) response.headers().add("Retry-After", reply.retry_after);
    response.set_body(reply.body, "application/json");
    request.reply(response).wait();
  }

  std::mutex mutex_;
  std::deque<Reply> replies_;
  std::atomic<int> requests_{0};
  int port_ = 0;
  std::unique_ptr<http_listener> listener_;
};

const std::string kTooManyRequests =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"slow down","reason":"TooManyRequests","code":429})";

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
  ScriptedServer server({{429, kTooManyRequests, "1"}, {200, R"({"kind":"Namespace"})", ""}});
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
  ScriptedServer server({{429, kTooManyRequests, "1"}});
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
