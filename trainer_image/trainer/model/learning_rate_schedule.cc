#include "trainer_image/trainer/model/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace fulcrum::trainer {

Status ValidateSchedule(const ScheduleOptions& options) {
  if (options.warmup_steps < 0) return InvalidArgument("--warmup-steps", "must be >= 0");
  if (!(options.final_factor >= 0.0 && options.final_factor <= 1.0))
    return InvalidArgument("--lr-final-factor", "must be in [0, 1]");
  if (options.kind == ScheduleKind::kStep && options.step_size < 1)
    return InvalidArgument("--lr-step-size", "must be >= 1 with --lr-schedule step");
  if (!(options.gamma > 0.0 && options.gamma <= 1.0))
    return InvalidArgument("--lr-gamma", "must be in (0, 1]");
  return Ok();
}

double LearningRateAt(double base, const ScheduleOptions& options, int64_t step,
                      int64_t total_steps) {
  if (step < options.warmup_steps) {
    return base * static_cast<double>(step + 1) / static_cast<double>(options.warmup_steps);
  }
  const int64_t after_warmup = step - options.warmup_steps;
  switch (options.kind) {
    case ScheduleKind::kConstant:
      return base;
    case ScheduleKind::kStep:
      return base * std::pow(options.gamma, static_cast<double>(after_warmup / options.step_size));
    case ScheduleKind::kCosine: {
      const int64_t decay_steps = total_steps - options.warmup_steps;
      if (total_steps <= 0 || decay_steps <= 1) return base;
      // 0 at the first step after warmup, 1 at the last step of the job.
      const double progress = std::clamp(
          static_cast<double>(after_warmup) / static_cast<double>(decay_steps - 1), 0.0, 1.0);
      const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      return base * (options.final_factor + (1.0 - options.final_factor) * cosine);
    }
  }
  return base;
}

}  // namespace fulcrum::trainer
