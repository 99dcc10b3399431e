// HttpEndpoints on loopback, fetched with cpprestsdk's client like the kubelet and Prometheus
// would: probes, metrics, unknown paths and methods, and listen addresses that cannot work.
#include "common/http_endpoints.h"

// gtest must come before cpprest, whose headers define a macro named U.
// clang-format off
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <cpprest/http_client.h>
// clang-format on

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>

namespace fulcrum {
namespace {

using ::testing::HasSubstr;
using web::http::methods;

const std::string kSetting = "--metrics-listen / metrics.listen";

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

Reply Fetch(int port, const std::string& path, const web::http::method& method = methods::GET) {
  web::http::client::http_client client("http://127.0.0.1:" + std::to_string(port));
  web::http::http_response response = client.request(method, path).get();
  return {response.status_code(), response.extract_utf8string(true).get(),
          response.headers().content_type()};
}

// A listening socket on 127.0.0.1 that HttpEndpoints does not know about, as another process's.
class ForeignListener {
 public:
  ForeignListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd_, 1) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      return;
    }
    port_ = ntohs(address.sin_port);
  }
  ~ForeignListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  ForeignListener(const ForeignListener&) = delete;
  ForeignListener& operator=(const ForeignListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

std::unique_ptr<HttpEndpoints> StartOrFail(Probes probes, std::function<std::string()> metrics) {
  Result<std::unique_ptr<HttpEndpoints>> endpoints =
      HttpEndpoints::Start("127.0.0.1:0", std::move(probes), std::move(metrics), kSetting);
  EXPECT_TRUE(endpoints.ok()) << endpoints.error().ToString();
  return endpoints.ok() ? std::move(endpoints).value() : nullptr;
}

TEST(HttpEndpoints, ServesHealthAndMetricsOnThePortItPicked) {
  auto endpoints = StartOrFail({[] { return Ok(); }, [] { return Ok(); }},
                               [] { return std::string("fulcrum_operator_workqueue_depth 3\n"); });
  ASSERT_NE(endpoints, nullptr);
  ASSERT_GT(endpoints->port(), 0);

  const Reply health = Fetch(endpoints->port(), "/healthz");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok");
  const Reply metrics = Fetch(endpoints->port(), "/metrics");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body, "fulcrum_operator_workqueue_depth 3\n");
  EXPECT_EQ(metrics.content_type, "text/plain; version=0.0.4");
}

TEST(HttpEndpoints, ReadinessFollowsTheReadyFunctionAndFailuresCarryTheMessage) {
  std::atomic<bool> ready{false};
  auto endpoints = StartOrFail({[] { return Ok(); },
                                [&ready]() -> Status {
                                  if (ready) return Ok();
                                  return MakeError(ErrorCode::kUnavailable, "not the leader yet");
                                }},
                               [] { return std::string(); });
  ASSERT_NE(endpoints, nullptr);

  const Reply before = Fetch(endpoints->port(), "/readyz");
  EXPECT_EQ(before.status, 500);
  EXPECT_EQ(before.body, "not the leader yet");
  EXPECT_EQ(Fetch(endpoints->port(), "/healthz").status, 200);  // alive while not ready
  ready = true;
  const Reply after = Fetch(endpoints->port(), "/readyz");
  EXPECT_EQ(after.status, 200);
  EXPECT_EQ(after.body, "ok");
}

TEST(HttpEndpoints, UnknownPathsAre404AndOtherMethodsThanGet405) {
  auto endpoints =
      StartOrFail({[] { return Ok(); }, [] { return Ok(); }}, [] { return std::string("m 1\n"); });
  ASSERT_NE(endpoints, nullptr);
  EXPECT_EQ(Fetch(endpoints->port(), "/").status, 404);
  EXPECT_EQ(Fetch(endpoints->port(), "/healthz/extra").status, 404);
  EXPECT_EQ(Fetch(endpoints->port(), "/metricsz").status, 404);
  EXPECT_EQ(Fetch(endpoints->port(), "/healthz", methods::POST).status, 405);
  EXPECT_EQ(Fetch(endpoints->port(), "/metrics", methods::DEL).status, 405);
  // A query string is not part of the path.
  EXPECT_EQ(Fetch(endpoints->port(), "/healthz?verbose=1").status, 200);
}

TEST(HttpEndpoints, EndpointsWithoutAFunctionAreNotServed) {
  // A metrics-only server, as on the operator's metrics address.
  auto endpoints = StartOrFail({}, [] { return std::string("m 1\n"); });
  ASSERT_NE(endpoints, nullptr);
  EXPECT_EQ(Fetch(endpoints->port(), "/healthz").status, 404);
  EXPECT_EQ(Fetch(endpoints->port(), "/readyz").status, 404);
  EXPECT_EQ(Fetch(endpoints->port(), "/metrics").status, 200);
}

TEST(HttpEndpoints, AThrowingProbeAnswers500AndTheServerKeepsServing) {
  auto endpoints = StartOrFail(
      {[]() -> Status { throw std::runtime_error("probe broke"); }, [] { return Ok(); }},
      [] { return std::string(); });
  ASSERT_NE(endpoints, nullptr);
  const Reply broken = Fetch(endpoints->port(), "/healthz");
  EXPECT_EQ(broken.status, 500);
  EXPECT_EQ(broken.body, "probe broke");
  EXPECT_EQ(Fetch(endpoints->port(), "/readyz").status, 200);
}

TEST(HttpEndpoints, AnEmptyHostListensOnEveryInterface) {
  Result<std::unique_ptr<HttpEndpoints>> endpoints =
      HttpEndpoints::Start(":0", {[] { return Ok(); }, {}}, {}, kSetting);
  ASSERT_TRUE(endpoints.ok()) << endpoints.error().ToString();
  EXPECT_EQ(Fetch((*endpoints)->port(), "/healthz").status, 200);  // reached on loopback
}

TEST(HttpEndpoints, AMalformedListenAddressIsAnErrorNamingTheSetting) {
  for (const std::string listen : {"8080", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:70000",
                                   "127.0.0.1:-1", "127.0.0.1:80x"}) {
    const Result<std::unique_ptr<HttpEndpoints>> endpoints =
        HttpEndpoints::Start(listen, {}, {}, kSetting);
    ASSERT_FALSE(endpoints.ok()) << listen;
    EXPECT_EQ(endpoints.error().code, ErrorCode::kInvalidArgument) << listen;
    EXPECT_EQ(endpoints.error().field, kSetting) << listen;
    EXPECT_THAT(endpoints.error().message, HasSubstr("\"" + listen + "\""));
  }
}

TEST(HttpEndpoints, APortInUseIsAnErrorNamingTheSetting) {
  const ForeignListener other;
  ASSERT_GT(other.port(), 0);
  const std::string listen = "127.0.0.1:" + std::to_string(other.port());
  const Result<std::unique_ptr<HttpEndpoints>> endpoints = HttpEndpoints::Start(
      listen, {}, [] { return std::string(); }, "--health-listen");
  ASSERT_FALSE(endpoints.ok());
  EXPECT_EQ(endpoints.error().field, "--health-listen");
  EXPECT_THAT(endpoints.error().message, HasSubstr(std::to_string(other.port())));
}

TEST(HttpEndpoints, StopsListeningWhenDestroyed) {
  auto endpoints =
      StartOrFail({[] { return Ok(); }, [] { return Ok(); }}, [] { return std::string(); });
  ASSERT_NE(endpoints, nullptr);
  const int port = endpoints->port();
  ASSERT_EQ(Fetch(port, "/healthz").status, 200);
  endpoints.reset();
  EXPECT_THROW(Fetch(port, "/healthz"), web::http::http_exception);
}

}  // namespace
}  // namespace fulcrum
