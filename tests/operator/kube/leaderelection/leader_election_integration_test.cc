// Leader election between two candidates on one Lease: exactly one leads; a
// leader that dies without releasing is replaced once the lease expires; a
// leader that stops cleanly hands over at once; a leader whose API server stops
// answering steps down by its renew deadline, before the other can take over.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>

#include "operator/kube/leaderelection/leader_elector.h"
#include "tests/operator/kube/kube_test_support.h"
#include "tests/support/freezable_proxy.h"

namespace fulcrum::kube {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AdminClient;
using testing::CreateNamespace;
using testing::WaitFor;

// One candidate running on its own thread, recording when it led.
class Candidate {
 public:
  Candidate(std::shared_ptr<ApiClient> client, const std::string& ns, const std::string& identity,
            milliseconds lease_duration, bool release_on_cancel) {
    LeaderElectionConfig config;
    config.lease_namespace = ns;
    config.lease_name = "fulcrum-operator";
    config.identity = identity;
    config.lease_duration = lease_duration;
    config.renew_deadline = lease_duration * 2 / 3;
    config.retry_period = milliseconds(500);
    config.release_on_cancel = release_on_cancel;
    config.on_started_leading = [this](std::stop_token stop) {
      started_at_ = std::chrono::steady_clock::now();
      leading_ = true;
      while (!stop.stop_requested()) std::this_thread::sleep_for(milliseconds(10));
      leading_ = false;
    };
    config.on_stopped_leading = [this] { ++stopped_; };
    auto elector = LeaderElector::Create(std::move(client), config);
    EXPECT_TRUE(elector.ok()) << elector.error().ToString();
    elector_ = std::move(elector).value();
    thread_ = std::jthread([this](std::stop_token stop) { elector_->Run(stop); });
  }

  // Stops the candidate's process: with release_on_cancel=false this is a
  // crash as far as the lease is concerned.
  void Stop() {
    thread_.request_stop();
    thread_.join();
  }

  bool leading() const { return leading_; }
  int stopped() const { return stopped_; }
  std::chrono::steady_clock::time_point started_at() const { return started_at_; }
  const LeaderElector& elector() const { return *elector_; }

 private:
  std::unique_ptr<LeaderElector> elector_;
  std::atomic<bool> leading_{false};
  std::atomic<int> stopped_{0};
  std::chrono::steady_clock::time_point started_at_{};
  std::jthread thread_;
};

TEST(KubeLeaderElection, RejectsInconsistentTimings) {
  LeaderElectionConfig config;
  config.lease_namespace = "default";
  config.lease_name = "x";
  config.identity = "me";
  config.lease_duration = seconds(5);
  config.renew_deadline = seconds(10);
  auto elector = LeaderElector::Create(nullptr, config);
  ASSERT_FALSE(elector.ok());
  EXPECT_EQ(elector.error().field, "lease_duration");
}

TEST(KubeLeaderElection, OneLeadsAndTheOtherTakesOverAfterACrashWithinLeaseDurationPlusRetry) {
  auto client = AdminClient();
  CreateNamespace(*client, "election-crash");
  const milliseconds lease(4000);
  auto alpha = std::make_unique<Candidate>(client, "election-crash", "alpha", lease,
                                           /*release_on_cancel=*/false);
  ASSERT_TRUE(WaitFor([&] { return alpha->leading(); }));
  auto beta = std::make_unique<Candidate>(client, "election-crash", "beta", lease, false);
  // Beta sees alpha as the leader and does not lead.
  ASSERT_TRUE(WaitFor([&] { return beta->elector().ObservedLeader() == "alpha"; }));
  std::this_thread::sleep_for(lease + milliseconds(1000));
  EXPECT_TRUE(alpha->leading());
  EXPECT_FALSE(beta->leading()) << "two leaders at once";

  const auto crashed_at = std::chrono::steady_clock::now();
  alpha->Stop();  // no release: the lease stays held by alpha until it expires
  ASSERT_TRUE(WaitFor([&] { return beta->leading(); }));
  const double takeover = std::chrono::duration<double>(beta->started_at() - crashed_at).count();
  std::printf("takeover after crash: %.2fs (lease %.1fs + retry 0.5s)\n", takeover,
              lease.count() / 1000.0);
  // Not before the lease could have expired; no later than lease + retry (with
  // jitter 1.2) plus generous slack for a loaded machine.
  EXPECT_GE(takeover, 0.0);
  EXPECT_LE(takeover, lease.count() / 1000.0 + 0.5 * 2.2 + 5.0);
  EXPECT_EQ(alpha->stopped(), 1);
  beta->Stop();
}

TEST(KubeLeaderElection, CleanReleaseHandsOverAtOnce) {
  auto client = AdminClient();
  CreateNamespace(*client, "election-release");
  const milliseconds lease(20'000);  // long, so a handover that waited for expiry would show
  auto alpha = std::make_unique<Candidate>(client, "election-release", "alpha", lease,
                                           /*release_on_cancel=*/true);
  ASSERT_TRUE(WaitFor([&] { return alpha->leading(); }));
  auto beta = std::make_unique<Candidate>(client, "election-release", "beta", lease, true);
  ASSERT_TRUE(WaitFor([&] { return beta->elector().ObservedLeader() == "alpha"; }));

  const auto released_at = std::chrono::steady_clock::now();
  alpha->Stop();
  ASSERT_TRUE(WaitFor([&] { return beta->leading(); }));
  const double handover = std::chrono::duration<double>(beta->started_at() - released_at).count();
  std::printf("handover after release: %.2fs (lease %.0fs)\n", handover, lease.count() / 1000.0);
  EXPECT_LT(handover, lease.count() / 1000.0 / 2) << "the handover waited for the lease to expire";

  auto lease_object = client->Get(resources::Leases(), "election-release", "fulcrum-operator");
  ASSERT_TRUE(lease_object.ok());
  EXPECT_EQ((*lease_object)["spec"]["holderIdentity"], "beta");
  EXPECT_GE((*lease_object)["spec"]["leaseTransitions"].get<int>(), 1);
  beta->Stop();
}

// A client of the test cluster's API server whose connections pass through `proxy`.
std::shared_ptr<ApiClient> ClientThrough(const fulcrum::testing::FreezableProxy& proxy,
                                         RestOptions options) {
  auto config = LoadKubeconfig(fulcrum::testing::Cluster().kubeconfig());
  EXPECT_TRUE(config.ok());
  if (!config.ok()) return nullptr;
  config->server = "https://127.0.0.1:" + std::to_string(proxy.port());
  auto rest = RestClient::Create(*config, options);
  EXPECT_TRUE(rest.ok()) << rest.error().ToString();
  if (!rest.ok()) return nullptr;
  return std::make_shared<ApiClient>(std::shared_ptr<RestClient>(std::move(rest).value()));
}

int ApiServerPort() {
  auto config = LoadKubeconfig(fulcrum::testing::Cluster().kubeconfig());
  EXPECT_TRUE(config.ok());
  return config.ok() ? std::stoi(config->server.substr(config->server.rfind(':') + 1)) : 0;
}

TEST(KubeLeaderElection, ALeaderCutOffFromTheApiServerStepsDownBeforeAnotherTakesOver) {
  auto client = AdminClient();
  CreateNamespace(*client, "election-cutoff");
  // Alpha reaches the API server through a proxy that will stop forwarding without closing
  // anything: its renewals then hang for the client's whole request timeout, far past its
  // renew deadline (4 s) and the lease (6 s).
  fulcrum::testing::FreezableProxy proxy(ApiServerPort());
  RestOptions slow;
  slow.request_timeout = std::chrono::seconds(20);
  const milliseconds lease(6000);
  auto alpha = std::make_unique<Candidate>(ClientThrough(proxy, slow), "election-cutoff", "alpha",
                                           lease, /*release_on_cancel=*/false);
  ASSERT_TRUE(WaitFor([&] { return alpha->elector().IsLeader(); }));
  auto beta = std::make_unique<Candidate>(client, "election-cutoff", "beta", lease, false);
  ASSERT_TRUE(WaitFor([&] { return beta->elector().ObservedLeader() == "alpha"; }));

  proxy.FreezeOpenConnections();
  // Watch both, every few milliseconds, until beta has led for a while.
  int both = 0;
  int samples = 0;
  const auto until = std::chrono::steady_clock::now() + seconds(60);
  std::optional<std::chrono::steady_clock::time_point> beta_led;
  while (std::chrono::steady_clock::now() < until) {
    const bool alpha_leads = alpha->elector().IsLeader();
    const bool beta_leads = beta->elector().IsLeader();
    both += alpha_leads && beta_leads;
    ++samples;
    if (beta_leads && !beta_led) beta_led = std::chrono::steady_clock::now();
    if (beta_led && std::chrono::steady_clock::now() > *beta_led + seconds(2)) break;
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_TRUE(beta_led.has_value()) << "beta never took over the abandoned lease";
  EXPECT_EQ(both, 0) << "two leaders at once in " << both << " of " << samples << " samples";
  EXPECT_FALSE(alpha->elector().IsLeader());
  EXPECT_FALSE(alpha->leading());  // its leader work was told to stop (and did)
  beta->Stop();
  alpha->Stop();  // returns once its stuck renewal times out
}

}  // namespace
}  // namespace fulcrum::kube
