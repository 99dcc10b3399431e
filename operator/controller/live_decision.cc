#include "operator/controller/live_decision.h"

#include <absl/strings/str_join.h>

#include <algorithm>

#include "common/rfc3339.h"
#include "operator/controller/job_lifecycle.h"
#include "operator/controller/shared_storage.h"

namespace fulcrum::controller {
namespace {

// The Event a removal raises (none for the pods of a job that ended).
std::optional<EventNote> RemovalEvent(const PodRemoval& removal, const JobSpec& spec,
                                      const JobState& state, const ReleasedWorker* released) {
  switch (removal.reason) {
    case RemovalReason::kFailed:
      return WorkerFailedEvent(removal.pod, state.failures.size(), spec.backoff_limit);
    case RemovalReason::kNodeLost:
      return WorkerLostEvent(removal.pod);
    case RemovalReason::kScaledDown:
      return ScaledDownEvent(removal.pod, spec.max_replicas);
    case RemovalReason::kReleased:
      return WorkerReleasedEvent(removal.pod, released->node, released->gpu_product,
                                 released->predicted_gain);
    case RemovalReason::kFinished:
      return std::nullopt;
  }
  return std::nullopt;
}

// The worker a released pod was, as the coordinator knows it.
ReleasedWorker ReleasedRecord(const PodRemoval& removal,
                              const coordinator::JobSessionSnapshot& training,
                              const std::string& now) {
  const auto member =
      std::find_if(training.members.begin(), training.members.end(),
                   [&](const coordinator::MemberSnapshot& m) { return m.pod == removal.pod; });
  const bool known = member != training.members.end();
  return {removal.pod, known ? member->node : "", known ? member->gpu_product : "",
          training.release_gain, now};
}

// The Events that the status going from `previous` to `status` raises.
std::vector<EventNote> StatusEvents(const nlohmann::json& previous, const nlohmann::json& status,
                                    JobPhase previous_phase, JobPhase phase, const JobState& state,
                                    const coordinator::JobSessionSnapshot& training) {
  std::vector<EventNote> events;
  if (phase != previous_phase) {
    if (phase == JobPhase::kRunning && previous_phase != JobPhase::kRebalancing) {
      events.push_back(StartedEvent(status.value("readyWorkers", 0)));
    } else if (phase == JobPhase::kSuspended) {
      events.push_back(SuspendedEvent());
    } else if (phase == JobPhase::kSucceeded) {
      events.push_back(SucceededEvent(status.value("step", int64_t{0})));
    } else if (phase == JobPhase::kFailed) {
      events.push_back(FailedEvent(*state.failed_reason, state.failed_message));
    }
  }
  // Said once, when it turns False, before a suspend or a restart can lose what is written.
  const auto storage_condition = [](const nlohmann::json& of) {
    if (!of.is_object()) return std::string();
    for (const nlohmann::json& condition : of.value("conditions", nlohmann::json::array())) {
      if (condition.value("type", "") == "SharedStorage") return condition.value("status", "");
    }
    return std::string();
  };
  if (storage_condition(status) == "False" && storage_condition(previous) != "False") {
    events.push_back(StorageNotSharedEvent(absl::StrJoin(state.storage_problems, "; ")));
  }
  if (ConditionIsTrue(status, "DataBound") && !ConditionIsTrue(previous, "DataBound")) {
    for (const nlohmann::json& condition : status["conditions"]) {
      if (condition.value("type", "") == "DataBound")
        events.push_back(DataBoundEvent(condition.value("message", "")));
    }
  }
  // A new generation and its first plan are one decision: one Event. The generation a restarted
  // coordinator forms while re-establishing is not news (the same workers go on).
  const int64_t previous_generation =
      previous.is_object() ? previous.value("membershipGeneration", int64_t{0}) : 0;
  const bool new_generation = !state.reestablishing && !training.generation_reason.empty() &&
                              training.membership_generation != previous_generation;
  if (new_generation) {
    events.push_back(MembershipChangedEvent(training.membership_generation,
                                            training.generation_step, training.generation_reason,
                                            training.plan));
  }
  const bool generation_plan =
      new_generation && training.last_rebalance.apply_at_step == training.generation_step;
  // A rebalance is news once: the same one goes on gaining figures (its measured step time and
  // calibration over its first steps). Compared whole, each update was a new Event: in an e2e
  // run one rebalance made up to six, and the job's burst of 25 ran out before its Succeeded.
  const auto rebalance_identity = [](const nlohmann::json& of) {
    if (!of.is_object() || !of.contains("lastRebalance")) return nlohmann::json();
    const nlohmann::json& rebalance = of["lastRebalance"];
    return nlohmann::json{rebalance.value("step", int64_t{-1}), rebalance.value("time", ""),
                          rebalance.value("reason", "")};
  };
  if (!generation_plan && status.contains("lastRebalance") &&
      rebalance_identity(previous) != rebalance_identity(status) &&
      training.last_rebalance.apply_at_step >= 0) {
    events.push_back(RebalancedEvent(training.last_rebalance.apply_at_step,
                                     training.last_rebalance.reason,
                                     training.last_rebalance.predicted_gain));
  }
  // Each adaptive change of the global batch the previous status did not show yet.
  const int64_t last_shown_change =
      previous.is_object() && previous.contains("batching") &&
              !previous["batching"].value("changes", nlohmann::json::array()).empty()
          ? previous["batching"]["changes"].back().value("step", int64_t{-1})
          : int64_t{-1};
  for (const coordinator::GlobalBatchChange& change : training.global_batch_changes) {
    if (change.step > last_shown_change) {
      events.push_back(GlobalBatchChangedEvent(change.step, change.from, change.to,
                                               change.learning_rate, change.reason));
    }
  }
  return events;
}

}  // namespace

LiveDecision DecideLive(const JobSpec& spec, const LiveWorld& world,
                        std::chrono::milliseconds stop_grace) {
  const WorkerWorld& workers = world.workers;
  const nlohmann::json& previous = world.previous;
  const coordinator::JobSessionSnapshot& training = world.training;
  const std::string now = FormatRfc3339(workers.now);
  const JobPhase previous_phase =
      ParseJobPhase(previous.is_object() ? previous.value("phase", "") : "");

  JobState state;
  state.observed_generation = spec.generation;
  state.min_workers = spec.min_replicas;
  state.step_target = spec.steps;
  state.output_path = spec.output_path;
  state.suspended = spec.suspend;
  state.failures = workers.failures;
  state.released = ReadReleasedWorkers(previous);
  state.start_time = previous.is_object() ? previous.value("startTime", "") : "";

  LiveDecision decision;
  if (std::optional<WorkerDecisions> ended =
          DeadlineExceeded(spec, state.start_time, workers.pods, workers.now)) {
    decision.workers = std::move(*ended);
  } else {
    decision.workers = DecideWorkers(spec, workers);
  }
  const WorkerDecisions& chosen = decision.workers;
  state.failures.insert(state.failures.end(), chosen.new_failures.begin(),
                        chosen.new_failures.end());
  state.succeeded = chosen.succeeded;
  state.failed_reason = chosen.failed_reason;
  state.failed_message = chosen.failed_message;
  if (state.succeeded || state.failed_reason) state.completion_time = now;
  if (state.start_time.empty() && !chosen.create.empty()) state.start_time = now;
  state.created = !workers.pods.empty() || !chosen.create.empty();
  state.rebalancing = training.last_rebalance.apply_at_step > training.step + 1;
  for (const StorageProblem& problem : UnsharedPaths(spec)) {
    state.storage_problems.push_back(problem.message);
  }
  state.reestablishing =
      Training(previous_phase) && training.step < 0 &&
      std::any_of(workers.pods.begin(), workers.pods.end(), [](const WorkerPod& pod) {
        return !pod.terminating && pod.phase == PodPhase::kRunning;
      });

  if (!chosen.new_failures.empty()) {
    nlohmann::json recorded = previous.is_object() ? previous : nlohmann::json::object();
    recorded["workerFailures"] = BuildJobStatus(state, training, previous, now)["workerFailures"];
    decision.record_failures = std::move(recorded);
  }
  for (const PodRemoval& removal : chosen.remove) {
    std::optional<ReleasedWorker> released;
    if (removal.reason == RemovalReason::kReleased) {
      released = ReleasedRecord(removal, training, now);
      state.released.push_back(*released);
    }
    decision.deletions.push_back(
        {removal, RemovalEvent(removal, spec, state, released ? &*released : nullptr)});
  }
  if (spec.suspend && !state.failed_reason) {
    decision.stop_trainers = std::any_of(
        workers.pods.begin(), workers.pods.end(),
        [](const WorkerPod& pod) { return !pod.terminating && pod.phase == PodPhase::kRunning; });
    if (decision.stop_trainers) {
      const int grace_seconds = static_cast<int>(stop_grace.count() / 1000);
      for (const WorkerPod& pod : StopTimedOut(workers.pods, previous, workers.now, stop_grace)) {
        decision.stop_timed_out.push_back({{pod.name, pod.uid, RemovalReason::kFinished},
                                           StopTimedOutEvent(pod.name, grace_seconds)});
      }
    }
  }
  if (state.failed_reason || state.succeeded) decision.workers.create.clear();

  decision.status = BuildJobStatus(state, training, previous, now);
  decision.phase = ParseJobPhase(decision.status.value("phase", ""));
  decision.status_events =
      StatusEvents(previous, decision.status, previous_phase, decision.phase, state, training);
  decision.failures = state.failures.size();
  return decision;
}

}  // namespace fulcrum::controller
