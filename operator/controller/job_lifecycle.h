// The time limits of a job's life, decided without I/O: spec.activeDeadlineSeconds (the job
// fails once it has run that long), spec.ttlSecondsAfterFinished (a finished job is deleted
// that long after it ended), and the grace a suspended job's trainers get to checkpoint and
// exit before their pods are deleted anyway.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "operator/controller/job_spec.h"
#include "operator/controller/worker_plan.h"

namespace fulcrum::controller {

using SystemTime = std::chrono::system_clock::time_point;

// The job has run spec.activeDeadlineSeconds since status.startTime (`start_time`, RFC 3339):
// it fails with DeadlineExceeded and every pod not already going is removed. Nothing when the
// spec sets no deadline or the job has not started.
std::optional<WorkerDecisions> DeadlineExceeded(const JobSpec& spec, const std::string& start_time,
                                                const std::vector<WorkerPod>& pods, SystemTime now);

struct TtlDecision {
  bool delete_now = false;
  // Not yet: look again after this long (nothing when there is no TTL to wait for).
  std::optional<std::chrono::milliseconds> check_after;
};

// A finished job (`completion_time` from its status) with spec.ttlSecondsAfterFinished.
TtlDecision DecideTtl(const JobSpec& spec, const std::string& completion_time, SystemTime now);

// When the stored status's Suspended condition turned True ("" if it is not True).
std::string SuspendedSince(const nlohmann::json& status);

// The running pods of a suspended job that still run `stop_grace` after the job was suspended
// (`status`: the stored status): they are deleted anyway.
std::vector<WorkerPod> StopTimedOut(const std::vector<WorkerPod>& pods,
                                    const nlohmann::json& status, SystemTime now,
                                    std::chrono::milliseconds stop_grace);

}  // namespace fulcrum::controller
