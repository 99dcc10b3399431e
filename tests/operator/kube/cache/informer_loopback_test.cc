// Informer and reflector behaviour against servers on loopback that misbehave
// in ways a real API server will not on demand: one that never answers a list,
// one that answers 429 with a long Retry-After, one that ends every watch at
// once. Stop must abandon whatever is in flight; a watch that ends at once must
// not be reopened in a hot loop.
#include <future>
#include <memory>

#include "operator/kube/cache/informer.h"
#include "tests/operator/kube/fake_clock.h"
#include "tests/operator/kube/loopback_servers.h"
#include "tests/support/polling.h"

namespace fulcrum::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::kTooManyRequestsStatus;
using testing::ScriptedServer;
using testing::StallingServer;

const std::string kEmptyList =
    R"({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"5"},"items":[]})";

std::shared_ptr<ApiClient> ClientOf(const std::string& url, RestOptions options = {}) {
  ClusterConfig config;
  config.server = url;
  auto rest = RestClient::Create(config, options);
  EXPECT_TRUE(rest.ok()) << rest.error().ToString();
  return std::make_shared<ApiClient>(std::shared_ptr<RestClient>(std::move(rest).value()));
}

InformerOptions JsonListsIn(const std::string& ns) {
  InformerOptions options;
  options.ns = ns;
  options.reflector.list_encoding = ListEncoding::kJson;
  return options;
}

// Calls informer->Stop() on another thread and waits up to `guard` for it. The
// guard only keeps a broken build from hanging the test binary; on failure the
// informer is leaked, since destroying it would block as Stop does.
bool StopReturns(std::unique_ptr<Informer>& informer, seconds guard = seconds(5)) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> stopped = done->get_future();
  Informer* raw = informer.get();
  std::thread([raw, done] {
    raw->Stop();
    done->set_value();
  }).detach();
  if (stopped.wait_for(guard) == std::future_status::ready) return true;
  (void)informer.release();
  return false;
}

TEST(InformerStop, AbandonsAListTheServerNeverAnswers) {
  StallingServer server;
  ASSERT_TRUE(server.ok());
  auto informer =
      std::make_unique<Informer>(ClientOf(server.url()), resources::ConfigMaps(), JsonListsIn("x"));
  informer->Start();
  // The list is in flight: the server has the request and will never answer.
  ASSERT_TRUE(
      fulcrum::testing::WaitUntil([&] { return server.requests_received() == 1; }, seconds(10)));
  EXPECT_EQ(server.closed_by_client(), 0);
  ASSERT_TRUE(StopReturns(informer)) << "Stop waited for the list in flight";
  // Stop abandoned the request: the client closed its connection.
  EXPECT_TRUE(
      fulcrum::testing::WaitUntil([&] { return server.closed_by_client() == 1; }, seconds(5)));
  EXPECT_FALSE(informer->HasSynced());
  EXPECT_EQ(informer->reflector().stats().lists, 0);
}

TEST(InformerStop, EndsAWaitForAClientSideRateLimitToken) {
  ScriptedServer server({{200, kEmptyList, ""}});
  ASSERT_TRUE(server.ok());
  RestOptions throttled;
  throttled.qps = 0.001;  // one request per 1000 s
  throttled.burst = 1;
  auto client = ClientOf(server.url(), throttled);
  ASSERT_TRUE(client->rest().Get("/api/v1/namespaces/x/configmaps").ok());  // the only token
  auto informer = std::make_unique<Informer>(client, resources::ConfigMaps(), JsonListsIn("x"));
  informer->Start();
  std::this_thread::sleep_for(milliseconds(200));  // the list waits for a token
  ASSERT_TRUE(StopReturns(informer)) << "Stop waited for the rate limiter";
  EXPECT_EQ(server.requests(), 1) << "the throttled list must be abandoned, not sent";
  EXPECT_EQ(informer->reflector().stats().lists, 0);
}

TEST(InformerStop, EndsARetryAfterSleep) {
  ScriptedServer server({{429, kTooManyRequestsStatus, "3600"}});
  ASSERT_TRUE(server.ok());
  auto informer =
      std::make_unique<Informer>(ClientOf(server.url()), resources::ConfigMaps(), JsonListsIn("x"));
  informer->Start();
  // The list was refused with Retry-After: 3600; the client now sleeps before retrying.
  ASSERT_TRUE(fulcrum::testing::WaitUntil([&] { return server.requests() == 1; }, seconds(10)));
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(StopReturns(informer)) << "Stop waited out the Retry-After";
  EXPECT_EQ(server.requests(), 1) << "no retry after Stop";
}

TEST(Reflector, AWatchEndedAtOnceWithNoEventIsRetriedAfterBackOffNotInAHotLoop) {
  // The list, then every watch: 200 with an empty body, ended by the server at once.
  ScriptedServer server({{200, kEmptyList, ""}, {200, "", ""}});
  ASSERT_TRUE(server.ok());
  auto clock = std::make_shared<testing::FakeClock>();
  InformerOptions options = JsonListsIn("x");
  options.reflector.clock = clock;  // back-off waits only as the test advances it
  options.reflector.backoff.initial = seconds(1);
  options.reflector.backoff.jitter_high = 1.0;  // no jitter
  auto informer =
      std::make_unique<Informer>(ClientOf(server.url()), resources::ConfigMaps(), options);
  informer->Start();
  ASSERT_TRUE(informer->WaitForSync(seconds(10)));
  ASSERT_TRUE(fulcrum::testing::WaitUntil([&] { return server.requests() >= 2; }, seconds(10)));
  // With the fake clock standing still the reflector must be waiting: no second
  // watch however long real time runs (a hot loop makes hundreds here).
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(server.requests(), 2) << "the empty watch was reopened without back-off";
  EXPECT_EQ(informer->reflector().stats().very_short_watches, 1);
  EXPECT_EQ(informer->reflector().stats().stream_ends, 0);

  clock->Advance(seconds(1));  // the back-off passes: the watch is reopened, once
  ASSERT_TRUE(fulcrum::testing::WaitUntil([&] { return server.requests() >= 3; }, seconds(10)));
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(server.requests(), 3);
  const auto paths = server.paths();
  for (std::size_t i = 1; i < paths.size(); ++i) {
    EXPECT_NE(paths[i].find("watch=1"), std::string::npos) << paths[i];
    EXPECT_NE(paths[i].find("resourceVersion=5"), std::string::npos)
        << "resumed from the last version, not re-listed: " << paths[i];
  }
  EXPECT_EQ(informer->reflector().stats().lists, 1);
  ASSERT_TRUE(StopReturns(informer));
}

}  // namespace
}  // namespace fulcrum::kube
