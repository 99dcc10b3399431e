#include "operator/kube/leaderelection/leader_elector.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "common/backoff.h"
#include "common/rfc3339.h"

namespace fulcrum::kube {
namespace {

constexpr double kJitterFactor = 1.2;  // client-go's JitterFactor

// A Lease's spec; an empty object if it has none (spec is optional: anyone
// with write access may leave it out or null it).
nlohmann::json SpecOf(const nlohmann::json& lease) {
  const auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) return nlohmann::json::object();
  return *spec;
}

}  // namespace

Status CheckLeaseTimings(std::chrono::milliseconds lease_duration,
                         std::chrono::milliseconds renew_deadline,
                         std::chrono::milliseconds retry_period) {
  if (retry_period.count() <= 0) return InvalidArgument("retry_period", "must be positive");
  if (lease_duration <= renew_deadline) {
    return InvalidArgument("lease_duration", "must be greater than renew_deadline");
  }
  if (static_cast<double>(renew_deadline.count()) <=
      kJitterFactor * static_cast<double>(retry_period.count())) {
    return InvalidArgument("renew_deadline", "must be greater than retry_period * 1.2");
  }
  return Ok();
}

Result<std::unique_ptr<LeaderElector>> LeaderElector::Create(std::shared_ptr<ApiClient> client,
                                                             LeaderElectionConfig config) {
  if (config.identity.empty()) return InvalidArgument("identity", "must not be empty");
  if (config.lease_name.empty()) return InvalidArgument("lease_name", "must not be empty");
  if (config.lease_namespace.empty())
    return InvalidArgument("lease_namespace", "must not be empty");
  if (Status status =
          CheckLeaseTimings(config.lease_duration, config.renew_deadline, config.retry_period);
      !status.ok()) {
    return status.error();
  }
  return std::unique_ptr<LeaderElector>(new LeaderElector(std::move(client), std::move(config)));
}

LeaderElector::LeaderElector(std::shared_ptr<ApiClient> client, LeaderElectionConfig config)
    : client_(std::move(client)), config_(std::move(config)), random_(std::random_device{}()) {}

bool LeaderElector::IsLeader() const {
  std::lock_guard lock(mutex_);
  return leading_;
}

std::string LeaderElector::ObservedLeader() const {
  std::lock_guard lock(mutex_);
  return observed_spec_.value("holderIdentity", "");
}

void LeaderElector::Observe(const nlohmann::json& spec) {
  std::string new_leader;
  {
    std::lock_guard lock(mutex_);
    if (spec == observed_spec_) return;
    const std::string previous = observed_spec_.value("holderIdentity", "");
    observed_spec_ = spec;
    observed_time_ = config_.clock->Now();
    new_leader = spec.value("holderIdentity", "");
    if (new_leader == previous) return;
  }
  if (config_.on_new_leader && !new_leader.empty()) config_.on_new_leader(new_leader);
}

bool LeaderElector::TryAcquireOrRenew() {
  const ResourceType leases = resources::Leases();
  const std::string now = FormatRfc3339(config_.clock->WallNow(), TimePrecision::kMicroseconds);
  const int duration_seconds =
      static_cast<int>(std::ceil(static_cast<double>(config_.lease_duration.count()) / 1000.0));
  nlohmann::json desired = {{"holderIdentity", config_.identity},
                            {"leaseDurationSeconds", duration_seconds},
                            {"acquireTime", now},
                            {"renewTime", now},
                            {"leaseTransitions", 0}};

  auto current = client_->Get(leases, config_.lease_namespace, config_.lease_name);
  if (!current.ok() && current.error().code == ErrorCode::kNotFound) {
    const nlohmann::json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.lease_name}, {"namespace", config_.lease_namespace}}},
        {"spec", desired}};
    auto created = client_->Create(leases, config_.lease_namespace, lease);
    if (!created.ok()) {
      log_.Info("could not create lease",
                {{"lease", config_.lease_name}, {"error", created.error().ToString()}});
      return false;
    }
    Observe(SpecOf(*created));
    return true;
  }
  if (!current.ok()) {
    log_.Warning("could not read lease",
                 {{"lease", config_.lease_name}, {"error", current.error().ToString()}});
    return false;
  }

  const nlohmann::json spec = SpecOf(*current);
  Observe(spec);
  const std::string holder = spec.value("holderIdentity", "");
  const bool mine = holder == config_.identity;
  if (!holder.empty() && !mine) {
    std::lock_guard lock(mutex_);
    const auto record_duration =
        std::chrono::seconds(spec.value("leaseDurationSeconds", duration_seconds));
    if (observed_time_ + record_duration > config_.clock->Now()) return false;  // still held
  }
  const int transitions = spec.value("leaseTransitions", 0);
  if (mine) {
    if (spec.contains("acquireTime") && spec["acquireTime"].is_string()) {
      desired["acquireTime"] = spec["acquireTime"];
    }
    desired["leaseTransitions"] = transitions;
  } else {
    desired["leaseTransitions"] = transitions + 1;
  }
  nlohmann::json updated_lease = *current;
  updated_lease["spec"] = desired;
  // Carries the resourceVersion just read: of two candidates racing for an
  // expired lease, one gets Conflict.
  auto updated = client_->Update(leases, config_.lease_namespace, updated_lease);
  if (!updated.ok()) {
    if (updated.error().code != ErrorCode::kConflict) {
      log_.Warning("could not update lease",
                   {{"lease", config_.lease_name}, {"error", updated.error().ToString()}});
    }
    return false;
  }
  Observe(SpecOf(*updated));
  return true;
}

std::optional<nlohmann::json> ReleasedLease(const nlohmann::json& lease,
                                            const std::string& identity, const std::string& now) {
  nlohmann::json spec = SpecOf(lease);
  // Not ours (any more), or no spec at all: nothing to release.
  const auto holder = spec.find("holderIdentity");
  if (holder == spec.end() || !holder->is_string() || holder->get<std::string>() != identity) {
    return std::nullopt;
  }
  nlohmann::json released = lease;
  // As client-go: no holder, a one-second duration; transitions are kept.
  spec["holderIdentity"] = "";
  spec["leaseDurationSeconds"] = 1;
  spec["renewTime"] = now;
  spec["acquireTime"] = now;
  released["spec"] = std::move(spec);
  return released;
}

void LeaderElector::Release() {
  const ResourceType leases = resources::Leases();
  auto current = client_->Get(leases, config_.lease_namespace, config_.lease_name);
  if (!current.ok()) {
    log_.Warning("could not read lease to release it",
                 {{"lease", config_.lease_name}, {"error", current.error().ToString()}});
    return;
  }
  auto released =
      ReleasedLease(*current, config_.identity,
                    FormatRfc3339(config_.clock->WallNow(), TimePrecision::kMicroseconds));
  if (!released) return;
  auto updated = client_->Update(leases, config_.lease_namespace, *released);
  if (updated.ok()) {
    log_.Info("released lease", {{"lease", config_.lease_name}, {"identity", config_.identity}});
  } else {
    log_.Warning("could not release lease",
                 {{"lease", config_.lease_name}, {"error", updated.error().ToString()}});
  }
}

void LeaderElector::SleepWithJitter(std::stop_token stop) {
  config_.clock->SleepFor(Jittered(config_.retry_period, 1.0, 1.0 + kJitterFactor, random_),
                          std::move(stop));
}

void LeaderElector::Run(std::stop_token stop) {
  const nlohmann::json who = {{"lease", config_.lease_namespace + "/" + config_.lease_name},
                              {"identity", config_.identity}};
  // Campaign.
  while (!stop.stop_requested() && !TryAcquireOrRenew()) SleepWithJitter(stop);
  if (stop.stop_requested()) return;
  {
    std::lock_guard lock(mutex_);
    leading_ = true;
  }
  log_.Info("started leading", who);
  // Leadership is valid until renew_deadline after the last renewal was *sent* (the lease's
  // renewTime is stamped then, and rivals time its expiry from when they later see it; their
  // lease_duration is longer). A watchdog ends it then even while a renewal is stuck in a
  // slow or unreachable API server, so that at no instant do two candidates lead.
  std::atomic<Clock::Duration::rep> valid_until{
      (config_.clock->Now() + config_.renew_deadline).time_since_epoch().count()};
  auto expired = [&] {
    return config_.clock->Now().time_since_epoch().count() >= valid_until.load();
  };
  // Renewing ends when Run is stopped or when the leader's function returns
  // (there is nothing left to lead for: renewing would only keep the others out).
  std::stop_source renewing;
  std::stop_callback stop_renewing(stop, [&renewing] { renewing.request_stop(); });
  std::atomic<bool> returned{false};
  std::jthread leader;
  if (config_.on_started_leading) {
    leader = std::jthread([this, &renewing, &returned](std::stop_token leading) {
      config_.on_started_leading(leading);
      returned = true;
      renewing.request_stop();
    });
  }
  std::jthread watchdog([&](std::stop_token watching) {
    while (!watching.stop_requested() && !expired()) {
      config_.clock->SleepFor(
          std::min<Clock::Duration>(config_.retry_period / 4, std::chrono::milliseconds(50)),
          watching);
    }
    if (watching.stop_requested()) return;
    {
      std::lock_guard lock(mutex_);
      leading_ = false;
    }
    if (leader.joinable()) leader.request_stop();
  });

  // Renew every retry_period until stopped or until the renew deadline passes
  // unrenewed, or another candidate is seen holding the lease.
  const std::stop_token renew = renewing.get_token();
  bool lost = false;
  std::string taken_by;
  while (!renew.stop_requested()) {
    bool renewed = false;
    while (!renew.stop_requested() && !expired()) {
      const Clock::TimePoint sent = config_.clock->Now();
      if ((renewed = TryAcquireOrRenew())) {
        valid_until = (sent + config_.renew_deadline).time_since_epoch().count();
        break;
      }
      // Someone else holds the lease (it was taken over, or written by hand):
      // this candidate no longer leads, whatever its renew deadline says.
      if (const std::string holder = ObservedLeader();
          !holder.empty() && holder != config_.identity) {
        taken_by = holder;
        break;
      }
      config_.clock->SleepFor(config_.retry_period, renew);
    }
    if (renew.stop_requested() && taken_by.empty()) break;
    if (!renewed || expired()) {  // a renewal that came back after the deadline is too late
      lost = true;
      break;
    }
    config_.clock->SleepFor(config_.retry_period, renew);
  }

  watchdog.request_stop();
  watchdog.join();
  if (leader.joinable()) {
    leader.request_stop();
    leader.join();
  }
  {
    std::lock_guard lock(mutex_);
    leading_ = false;
  }
  if (!taken_by.empty()) {
    nlohmann::json fields = who;
    fields["holder"] = taken_by;
    log_.Warning("lost leadership: another candidate holds the lease", fields);
  } else if (lost) {
    log_.Warning("lost leadership: could not renew within the renew deadline", who);
  } else if (config_.release_on_cancel) {
    if (returned) log_.Info("the leader's function returned; releasing the lease", who);
    Release();
  }
  log_.Info("stopped leading", who);
  if (config_.on_stopped_leading) config_.on_stopped_leading();
}

}  // namespace fulcrum::kube
