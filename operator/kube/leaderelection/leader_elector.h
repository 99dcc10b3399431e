// Leader election on a coordination.k8s.io/v1 Lease, with client-go's
// semantics (tools/leaderelection): a candidate takes the lease when it is
// free or when its holder has not renewed it for lease_duration, as measured
// on the candidate's own clock from when it last saw the lease change (so
// clock skew between machines does not matter); the leader renews every
// retry_period and gives up leading if it cannot renew within renew_deadline
// (counted from when the last successful renewal was sent, and enforced by a
// watchdog even while a renewal hangs on a slow API server, so leadership always
// ends before a rival can see the lease expire);
// a leader that sees another candidate holding the lease stops leading at once
// (client-go waits for its renew deadline; there is no reason to);
// when the leader's function returns, or on a clean stop, it stops renewing and
// releases the lease so that another candidate takes over at once.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stop_token>
#include <string>

#include "common/log.h"
#include "common/result.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/util/clock.h"

namespace fulcrum::kube {

struct LeaderElectionConfig {
  std::string lease_namespace;
  std::string lease_name;
  std::string identity;  // unique per candidate, e.g. the pod name
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
  bool release_on_cancel = true;

  // Runs on its own thread while this candidate leads; `stop` is requested when
  // leadership ends (lost, or Run stopped). It must return soon after. When it
  // returns by itself, leading ends: renewals stop, the lease is released (with
  // release_on_cancel) and Run returns.
  std::function<void(std::stop_token stop)> on_started_leading;
  // Called after leading ended and on_started_leading returned.
  std::function<void()> on_stopped_leading;
  // Called when the observed holder changes (including to this candidate).
  std::function<void(const std::string& identity)> on_new_leader;

  std::shared_ptr<const Clock> clock = SystemClock();
};

// client-go's rule for the three timings: lease_duration > renew_deadline > 1.2 x
// retry_period > 0. The error's field is "lease_duration", "renew_deadline" or "retry_period".
Status CheckLeaseTimings(std::chrono::milliseconds lease_duration,
                         std::chrono::milliseconds renew_deadline,
                         std::chrono::milliseconds retry_period);

// The Lease to write to release `lease` held by `identity`, as client-go does:
// no holder, a one-second duration, acquire and renew times `now`, transitions
// kept. nullopt when `identity` does not hold it: another candidate does, or
// the Lease has no spec (spec is optional; anyone allowed to write Leases may
// clear it). Pure.
std::optional<nlohmann::json> ReleasedLease(const nlohmann::json& lease,
                                            const std::string& identity, const std::string& now);

class LeaderElector {
 public:
  // Checks the configuration as client-go does: lease_duration > renew_deadline
  // > retry_period * 1.2, all positive, identity and lease name set.
  static Result<std::unique_ptr<LeaderElector>> Create(std::shared_ptr<ApiClient> client,
                                                       LeaderElectionConfig config);

  // Campaigns, leads, and (if leading when `stop` is requested or the leader's
  // function returns, and release_on_cancel is set) releases the lease. Blocks
  // until it has stopped leading or `stop` is requested; run it on its own thread.
  void Run(std::stop_token stop);

  bool IsLeader() const;
  std::string ObservedLeader() const;

 private:
  LeaderElector(std::shared_ptr<ApiClient> client, LeaderElectionConfig config);
  bool TryAcquireOrRenew();
  void Release();
  // Remembers `spec` as the last seen record; restarts the expiry clock if it changed.
  void Observe(const nlohmann::json& spec);
  void SleepWithJitter(std::stop_token stop);

  std::shared_ptr<ApiClient> client_;
  LeaderElectionConfig config_;
  log::Logger log_{"kube.leader-election"};
  std::mt19937_64 random_;

  mutable std::mutex mutex_;
  nlohmann::json observed_spec_ =
      nlohmann::json::object();  // the lease spec as last read or written
  std::string observed_resource_version_;
  Clock::TimePoint observed_time_{};
  bool leading_ = false;
};

}  // namespace fulcrum::kube
