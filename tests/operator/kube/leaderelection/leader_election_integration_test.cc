// Leader election between two candidates on one Lease: exactly one leads; a
// leader that dies without releasing is replaced once the lease expires; a
// leader that stops cleanly hands over at once; a leader whose API server stops
// answering steps down by its renew deadline, before the other can take over.
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "common/rfc3339.h"
#include "operator/kube/leaderelection/leader_elector.h"
#include "tests/operator/kube/kube_test_support.h"
#include "tests/support/freezable_proxy.h"

namespace fulcrum::kube {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::AdminClient;
using testing::CreateNamespace;
using testing::WaitFor;

// One candidate running on its own thread, recording when it led. Its leader
// function works until told to stop, or returns after `lead_for` if set.
class Candidate {
 public:
  Candidate(std::shared_ptr<ApiClient> client, const std::string& ns, const std::string& identity,
            milliseconds lease_duration, bool release_on_cancel,
            std::optional<milliseconds> lead_for = std::nullopt,
            milliseconds retry_period = milliseconds(500)) {
    LeaderElectionConfig config;
    config.lease_namespace = ns;
    config.lease_name = "fulcrum-operator";
    config.identity = identity;
    config.lease_duration = lease_duration;
    config.renew_deadline = lease_duration * 2 / 3;
    config.retry_period = retry_period;
    config.release_on_cancel = release_on_cancel;
    config.on_started_leading = [this, lead_for](std::stop_token stop) {
      started_at_ = std::chrono::steady_clock::now();
      started_wall_ = std::chrono::system_clock::now();
      leading_ = true;
      const auto until = std::chrono::steady_clock::now() + lead_for.value_or(hours(24));
      while (!stop.stop_requested() && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(milliseconds(10));
      }
      leading_ = false;
    };
    config.on_stopped_leading = [this] { ++stopped_; };
    auto elector = LeaderElector::Create(std::move(client), config);
    EXPECT_TRUE(elector.ok()) << elector.error().ToString();
    elector_ = std::move(elector).value();
    thread_ = std::jthread([this](std::stop_token stop) {
      elector_->Run(stop);
      run_returned_ = true;
    });
  }

  // Stops the candidate's process: with release_on_cancel=false this is a
  // crash as far as the lease is concerned.
  void Stop() {
    thread_.request_stop();
    thread_.join();
  }

  bool leading() const { return leading_; }
  int stopped() const { return stopped_; }
  bool run_returned() const { return run_returned_; }
  std::chrono::steady_clock::time_point started_at() const { return started_at_; }
  std::chrono::system_clock::time_point started_wall() const { return started_wall_; }
  const LeaderElector& elector() const { return *elector_; }

 private:
  std::unique_ptr<LeaderElector> elector_;
  std::atomic<bool> leading_{false};
  std::atomic<int> stopped_{0};
  std::atomic<bool> run_returned_{false};
  std::chrono::steady_clock::time_point started_at_{};
  std::chrono::system_clock::time_point started_wall_{};
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
  // Over a whole lease and more, at every sample: alpha leads, beta does not.
  int samples = 0;
  int wrong = 0;
  for (const auto until = std::chrono::steady_clock::now() + lease + milliseconds(1000);
       std::chrono::steady_clock::now() < until; ++samples) {
    wrong += !alpha->leading() || beta->leading();
    std::this_thread::sleep_for(milliseconds(2));
  }
  EXPECT_EQ(wrong, 0) << "of " << samples << " samples, alpha did not lead alone";

  // From the crash until beta leads, sample beta continuously, with the wall clock.
  std::vector<std::pair<std::chrono::system_clock::time_point, bool>> beta_samples;
  std::atomic<bool> sampling{true};
  std::jthread sampler([&] {
    while (sampling) {
      beta_samples.emplace_back(std::chrono::system_clock::now(), beta->leading());
      if (beta_samples.back().second) return;
      std::this_thread::sleep_for(milliseconds(2));
    }
  });
  const auto crashed_at = std::chrono::steady_clock::now();
  alpha->Stop();  // no release: the lease stays held by alpha until it expires
  auto lease_object = client->Get(resources::Leases(), "election-crash", "fulcrum-operator");
  ASSERT_TRUE(lease_object.ok());
  EXPECT_EQ((*lease_object)["spec"]["holderIdentity"], "alpha");
  // Alpha's last renewal, as it stamped it: the lease could expire lease_duration after.
  const auto renewed =
      ParseRfc3339((*lease_object)["spec"]["renewTime"].get<std::string>(), "spec.renewTime");
  ASSERT_TRUE(renewed.ok()) << renewed.error().ToString();
  const auto could_expire = *renewed + lease;
  ASSERT_TRUE(WaitFor([&] { return beta->leading(); }));
  sampling = false;
  sampler.join();
  int early = 0;
  for (const auto& [when, leading] : beta_samples) early += leading && when < could_expire;
  EXPECT_EQ(early, 0) << "beta led before alpha's lease could have expired";
  EXPECT_GE(beta->started_wall(), could_expire) << "beta took over an unexpired lease";
  EXPECT_GT(beta_samples.size(), 100u) << "too few samples to tell";
  const double takeover = std::chrono::duration<double>(beta->started_at() - crashed_at).count();
  std::printf("takeover after crash: %.2fs (lease %.1fs + retry 0.5s), %zu samples\n", takeover,
              lease.count() / 1000.0, beta_samples.size());
  // No later than lease + retry (with jitter 1.2) plus generous slack for a loaded machine.
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

// The leader's function returning ends leadership: no more renewals, the lease
// released at once for the others (not held until Run is stopped).
TEST(KubeLeaderElection, WhenTheLeadersFunctionReturnsItStopsRenewingAndReleases) {
  auto client = AdminClient();
  CreateNamespace(*client, "election-done");
  auto alpha = std::make_unique<Candidate>(client, "election-done", "alpha", milliseconds(6000),
                                           /*release_on_cancel=*/true,
                                           /*lead_for=*/milliseconds(1000));
  ASSERT_TRUE(WaitFor([&] { return alpha->stopped() == 1; }, seconds(20)))
      << "the leader's function returned but leadership did not end";
  EXPECT_FALSE(alpha->elector().IsLeader());
  EXPECT_TRUE(WaitFor([&] { return alpha->run_returned(); }, seconds(5)));
  auto released = client->Get(resources::Leases(), "election-done", "fulcrum-operator");
  ASSERT_TRUE(released.ok());
  EXPECT_EQ((*released)["spec"]["holderIdentity"], "") << (*released)["spec"].dump();
  // Nothing writes the lease any more: three retry periods later it is unchanged.
  std::this_thread::sleep_for(milliseconds(1500));
  auto later = client->Get(resources::Leases(), "election-done", "fulcrum-operator");
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(ResourceVersionOf(*later), ResourceVersionOf(*released)) << "still renewing";
  alpha->Stop();
}

// Leadership loss: another holder takes the Lease (written by hand here, as a
// rival with a different view of expiry, or an operator, would). The leader
// must stop leading as soon as it sees that, not write over it, and not wait
// for its renew deadline.
TEST(KubeLeaderElection, ALeaderThatSeesAnotherHolderStopsLeadingAtOnce) {
  auto client = AdminClient();
  CreateNamespace(*client, "election-taken");
  const milliseconds lease(30'000);  // renew deadline 20 s: far longer than the retry (0.5 s)
  auto alpha = std::make_unique<Candidate>(client, "election-taken", "alpha", lease,
                                           /*release_on_cancel=*/true);
  ASSERT_TRUE(WaitFor([&] { return alpha->leading(); }));
  auto current = client->Get(resources::Leases(), "election-taken", "fulcrum-operator");
  ASSERT_TRUE(current.ok());
  nlohmann::json taken = *current;
  taken["spec"]["holderIdentity"] = "intruder";
  taken["spec"]["leaseDurationSeconds"] = 3600;
  // Retried on Conflict: alpha renews in between.
  ASSERT_TRUE(WaitFor([&] {
    auto latest = client->Get(resources::Leases(), "election-taken", "fulcrum-operator");
    if (!latest.ok()) return false;
    taken["metadata"]["resourceVersion"] = ResourceVersionOf(*latest);
    return client->Update(resources::Leases(), "election-taken", taken).ok();
  }));
  const auto taken_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor([&] { return alpha->stopped() == 1; }, seconds(60)));
  const double lost_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - taken_at).count();
  std::printf("stopped leading %.2fs after the lease was taken (renew deadline 20s)\n", lost_after);
  EXPECT_LT(lost_after, 10.0) << "the leader waited for its renew deadline";
  EXPECT_FALSE(alpha->elector().IsLeader());
  EXPECT_FALSE(alpha->leading()) << "its leader function was told to stop";
  EXPECT_EQ(alpha->elector().ObservedLeader(), "intruder");
  auto after = client->Get(resources::Leases(), "election-taken", "fulcrum-operator");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["spec"]["holderIdentity"], "intruder")
      << "a leader that lost the lease must neither renew nor release it";
  alpha->Stop();
}

}  // namespace
}  // namespace fulcrum::kube
