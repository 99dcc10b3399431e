#include "operator/coordinator/job_session_config.h"

#include <cmath>

namespace fulcrum::coordinator {

Status ValidateJobConfig(const JobSessionConfig& config) {
  if (config.name.empty() || config.name.size() > 253) {
    return InvalidArgument("name", "must be 1 to 253 characters");
  }
  if (config.token.size() < 8) {
    return InvalidArgument("token", "must be at least 8 characters; use a random secret");
  }
  if (config.global_batch < 1) return InvalidArgument("global_batch", "must be an integer >= 1");
  if (config.min_workers < 1) return InvalidArgument("min_workers", "must be an integer >= 1");
  if (config.max_workers != 0 && config.max_workers < config.min_workers) {
    return InvalidArgument("max_workers", "must be 0 (no cap) or >= min_workers");
  }
  if (config.interval_steps < 1) return InvalidArgument("interval_steps", "must be >= 1");
  if (!std::isfinite(config.min_gain) || config.min_gain < 0.0 || config.min_gain >= 1.0) {
    return InvalidArgument("min_gain", "must be in [0, 1), e.g. 0.05");
  }
  if (config.leave_timeout.count() < 0) return InvalidArgument("leave_timeout", "must be >= 0");
  if (config.heartbeat_timeout.count() <= 0) {
    return InvalidArgument("heartbeat_timeout", "must be > 0");
  }
  if (config.hang_timeout.count() < 0) {
    return InvalidArgument("hang_timeout", "must be >= 0 (0: off)");
  }
  if (config.settle.count() < 0) return InvalidArgument("settle", "must be >= 0");
  if (config.min_apply_lead_steps < 1) {
    return InvalidArgument("min_apply_lead_steps", "must be >= 1");
  }
  if (!std::isfinite(config.apply_lead_seconds) || config.apply_lead_seconds < 0.0) {
    return InvalidArgument("apply_lead_seconds", "must be a number >= 0");
  }
  if (!std::isfinite(config.learning_rate) || config.learning_rate < 0.0) {
    return InvalidArgument("learning_rate", "must be a number >= 0 (0: the trainers' --lr)");
  }
  if (config.total_steps < 0) {
    return InvalidArgument("total_steps", "must be >= 0 (0: the trainers' --steps)");
  }
  const JobSessionConfig::AdaptiveBatching& batching = config.batching;
  if (!(batching.noise_half_life_steps > 0.0) || !std::isfinite(batching.noise_half_life_steps)) {
    return InvalidArgument("batching.noise_half_life_steps", "must be a number > 0");
  }
  if (batching.enabled) {
    if (batching.min_batch < config.min_workers || batching.max_batch < batching.min_batch) {
      return InvalidArgument("batching",
                             "adaptive needs min_workers <= min <= max (every worker of the "
                             "minimum group needs one sample per step)");
    }
    if (!(config.learning_rate > 0.0)) {
      return InvalidArgument("learning_rate",
                             "adaptive batching scales the job's learning rate with the global "
                             "batch: set it (> 0), the rate for the starting global batch");
    }
    if (batching.min_steps_between_changes < 1 || !(batching.max_factor > 1.0) ||
        !(batching.min_gain >= 0.0)) {
      return InvalidArgument("batching",
                             "needs min_steps_between_changes >= 1, max_factor > 1, min_gain >= 0");
    }
  }
  return Ok();
}

}  // namespace fulcrum::coordinator
