#include "operator/controller/job_lifecycle.h"

#include "common/rfc3339.h"
#include "operator/controller/job_status.h"

namespace fulcrum::controller {

using std::chrono::milliseconds;

std::optional<WorkerDecisions> DeadlineExceeded(const JobSpec& spec, const std::string& start_time,
                                                const std::vector<WorkerPod>& pods,
                                                SystemTime now) {
  if (!spec.active_deadline_seconds) return std::nullopt;
  const Result<SystemTime> started = ParseRfc3339(start_time, "status.startTime");
  if (!started.ok() || now - *started < std::chrono::seconds(*spec.active_deadline_seconds)) {
    return std::nullopt;
  }
  WorkerDecisions decisions;
  decisions.failed_reason = "DeadlineExceeded";
  decisions.failed_message = "the job ran longer than spec.activeDeadlineSeconds (" +
                             std::to_string(*spec.active_deadline_seconds) + " s)";
  for (const WorkerPod& pod : pods) {
    if (!pod.terminating) decisions.remove.push_back({pod.name, pod.uid, RemovalReason::kFinished});
  }
  return decisions;
}

TtlDecision DecideTtl(const JobSpec& spec, const std::string& completion_time, SystemTime now) {
  if (!spec.ttl_seconds_after_finished) return {};
  const Result<SystemTime> completed = ParseRfc3339(completion_time, "status.completionTime");
  if (!completed.ok()) return {};
  const SystemTime expires = *completed + std::chrono::seconds(*spec.ttl_seconds_after_finished);
  if (now >= expires) return {.delete_now = true, .check_after = std::nullopt};
  // Half a second late rather than early: the API server's clock rounds to whole seconds.
  return {
      .delete_now = false,
      .check_after = std::chrono::duration_cast<milliseconds>(expires - now) + milliseconds(500)};
}

std::string SuspendedSince(const nlohmann::json& status) {
  if (!status.is_object()) return "";
  for (const nlohmann::json& condition : status.value("conditions", nlohmann::json::array())) {
    if (condition.value("type", "") == "Suspended" && condition.value("status", "") == "True") {
      return condition.value("lastTransitionTime", "");
    }
  }
  return "";
}

std::vector<WorkerPod> StopTimedOut(const std::vector<WorkerPod>& pods,
                                    const nlohmann::json& status, SystemTime now,
                                    milliseconds stop_grace) {
  std::vector<WorkerPod> late;
  const Result<SystemTime> since =
      ParseRfc3339(SuspendedSince(status), "status.conditions[Suspended].lastTransitionTime");
  if (!since.ok() || now - *since <= stop_grace) return late;
  for (const WorkerPod& pod : pods) {
    if (!pod.terminating && pod.phase == PodPhase::kRunning) late.push_back(pod);
  }
  return late;
}

}  // namespace fulcrum::controller
