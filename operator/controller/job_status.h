// A HeteroTrainingJob's status, from what the controller knows of its pods and what the
// coordinator knows of its training (a JobSessionSnapshot). Pure. Conditions keep their
// lastTransitionTime while their status does not change, and StatusDiffers ignores what
// changes on every step, so the controller writes status only when something a user would
// notice has changed (and at most every status.minInterval).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::controller {

// What the reconciler decided about the job as a whole.
struct JobState {
  int64_t observed_generation = 0;  // metadata.generation acted on
  bool created = false;             // Secret, Service and the first pods exist
  bool suspended = false;
  bool succeeded = false;
  std::optional<std::string> failed_reason{};  // CamelCase reason; with failed_message
  std::string failed_message{};
  bool rebalancing = false;  // a new plan is announced and not yet applied
  int min_workers = 1;
};

// `previous`: the status now stored (may be empty); `now_rfc3339`: the time for transitions.
nlohmann::json BuildJobStatus(const JobState& state,
                              const coordinator::JobSessionSnapshot& training,
                              const nlohmann::json& previous, const std::string& now_rfc3339);

// False when `a` and `b` differ only in what moves every step (step, throughput, per-worker
// speeds): those alone are written at most every status.minInterval.
bool StatusDiffersBeyondProgress(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace fulcrum::controller
