#include "trainer_image/trainer/model/learning_rate_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

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

namespace {

// The schedule after warmup, the cosine's position given: 0 at the first step after warmup, 1
// at the last step of the job (nullopt: no last step known, the base rate holds).
double AfterWarmup(double base, const ScheduleOptions& options, int64_t step,
                   std::optional<double> cosine_progress) {
  switch (options.kind) {
    case ScheduleKind::kConstant:
      return base;
    case ScheduleKind::kStep:
      return base * std::pow(options.gamma, static_cast<double>((step - options.warmup_steps) /
                                                                options.step_size));
    case ScheduleKind::kCosine: {
      if (!cosine_progress) return base;
      const double cosine =
          0.5 * (1.0 + std::cos(std::numbers::pi * std::clamp(*cosine_progress, 0.0, 1.0)));
      return base * (options.final_factor + (1.0 - options.final_factor) * cosine);
    }
  }
  return base;
}

double Warmup(double base, const ScheduleOptions& options, int64_t step) {
  return base * static_cast<double>(step + 1) / static_cast<double>(options.warmup_steps);
}

}  // namespace

double LearningRateAt(double base, const ScheduleOptions& options, int64_t step,
                      int64_t total_steps) {
  if (step < options.warmup_steps) return Warmup(base, options, step);
  const int64_t decay_steps = total_steps - options.warmup_steps;
  std::optional<double> progress;
  if (total_steps > 0 && decay_steps > 1) {
    progress =
        static_cast<double>(step - options.warmup_steps) / static_cast<double>(decay_steps - 1);
  }
  return AfterWarmup(base, options, step, progress);
}

double LearningRateAtSample(double base, const ScheduleOptions& options, int64_t step,
                            double samples_done, double total_samples, double global_batch) {
  if (step < options.warmup_steps) return Warmup(base, options, step);
  if (!(global_batch > 0.0) || !(total_samples > 0.0)) return AfterWarmup(base, options, step, {});
  // In samples what LearningRateAt counts in steps: the decay starts after warmup_steps
  // batches and ends at the start of the last batch, ceil(total / B) - 1 batches in. Whole
  // numbers (a fixed B) are exact in a double, so this is LearningRateAt bit for bit then.
  const double last_batch_start =
      std::ceil(total_samples / global_batch) * global_batch - global_batch;
  const double decay_start = static_cast<double>(options.warmup_steps) * global_batch;
  std::optional<double> progress;
  if (last_batch_start > decay_start) {
    progress = (samples_done - decay_start) / (last_batch_start - decay_start);
  }
  return AfterWarmup(base, options, step, progress);
}

}  // namespace fulcrum::trainer
