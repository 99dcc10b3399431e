// A HeteroTrainingJob's status, from what the controller knows of its pods and what the
// coordinator knows of its training (a JobSessionSnapshot). Pure. Conditions keep their
// lastTransitionTime while their status does not change, and StatusDiffers ignores what
// changes on every step, so the controller writes status only when something a user would
// notice has changed (and at most every status.minInterval).
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::controller {

// A worker whose smoothed data wait is at least this share of its step time makes the job
// DataBound: it mostly waits for its batches, so the fix is storage or loading, not its share.
inline constexpr double kDataBoundFraction = 0.5;

// Whether the condition `type` of a status is True.
bool ConditionIsTrue(const nlohmann::json& status, const std::string& type);

// A worker pod that failed (counted against spec.backoffLimit once, by its uid).
struct WorkerFailure {
  std::string pod;
  std::string uid;
  std::string reason;  // the pod's or container's reason, e.g. Error, OOMKilled
  std::string time;    // RFC 3339
  bool operator==(const WorkerFailure&) const = default;
};

// A worker released because its GPU could not make the job faster; its node takes no new
// worker of this job.
struct ReleasedWorker {
  std::string pod;
  std::string node;
  std::string gpu_product;
  double predicted_gain = 0.0;
  std::string time;  // RFC 3339
  bool operator==(const ReleasedWorker&) const = default;
};

// What the reconciler decided about the job as a whole.
struct JobState {
  int64_t observed_generation = 0;  // metadata.generation acted on
  bool created = false;             // Secret, Service and the first pods exist
  bool suspended = false;
  bool succeeded = false;
  std::optional<std::string> failed_reason{};  // CamelCase reason; with failed_message
  std::string failed_message{};
  bool rebalancing = false;  // a new plan is announced and not yet applied
  // The job was training, its trainers still run, and the coordinator (restarted with the
  // operator, or a new leader's) has not heard a step from them yet: the last known phase,
  // workers and throughput stand until it has, under a Reestablishing condition.
  bool reestablishing = false;
  // checkpoint.path / output.path on no volume every worker shares (shared_storage.h): each
  // problem names the field and the fix. Empty: they are shared (or not set).
  std::vector<std::string> storage_problems{};
  int min_workers = 1;
  // spec.training.steps, when the job has one: a job that Succeeded trained exactly this many,
  // even if its trainers' last reports were lost as their streams closed with the pods.
  std::optional<int64_t> step_target{};
  std::string start_time{};       // RFC 3339: when the first pods were created
  std::string completion_time{};  // RFC 3339: when the job Succeeded or Failed
  std::string output_path{};      // spec.output.path: named in status once Succeeded
  std::vector<WorkerFailure> failures{};
  std::vector<ReleasedWorker> released{};
};

// The failures recorded in a stored status (status.workerFailures).
std::vector<WorkerFailure> ReadWorkerFailures(const nlohmann::json& status);
// The workers released so far (status.releasedWorkers).
std::vector<ReleasedWorker> ReadReleasedWorkers(const nlohmann::json& status);

// `previous`: the status now stored (may be empty); `now_rfc3339`: the time for transitions.
nlohmann::json BuildJobStatus(const JobState& state,
                              const coordinator::JobSessionSnapshot& training,
                              const nlohmann::json& previous, const std::string& now_rfc3339);

// False when `a` and `b` differ only in what moves every step (step, throughput, per-worker
// speeds): those alone are written at most every status.minInterval.
bool StatusDiffersBeyondProgress(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace fulcrum::controller
