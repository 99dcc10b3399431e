// The learning rate as a function of the step: linear warmup, then constant, cosine decay or
// step decay over the job's steps. Pure and torch-free: every rank computes the same rate from
// the same (step, total steps), so a rebalance or a membership change never moves it.
#pragma once

#include <cstdint>

#include "common/result.h"

namespace fulcrum::trainer {

enum class ScheduleKind { kConstant, kCosine, kStep };

struct ScheduleOptions {
  ScheduleKind kind = ScheduleKind::kConstant;
  // Steps 0 .. warmup_steps - 1 ramp linearly from base / warmup_steps up to base.
  int64_t warmup_steps = 0;
  // Cosine: from base after warmup down to base * final_factor at the last step.
  double final_factor = 0.0;
  // Step decay: after warmup, every step_size steps the rate is multiplied by gamma.
  int64_t step_size = 0;
  double gamma = 0.1;
};

// Errors name the flag.
Status ValidateSchedule(const ScheduleOptions& options);

// The rate of step `step` (0-based) in a job of `total_steps` steps. total_steps <= 0 (unknown,
// a job trained until stopped): cosine decay holds the base rate.
double LearningRateAt(double base, const ScheduleOptions& options, int64_t step,
                      int64_t total_steps);

// The same schedule for a job that trains for a number of samples (epochs), whose global batch
// may change (an adaptive or edited globalBatchSize): the cosine follows the samples trained,
// `samples_done` of `total_samples`, at `global_batch` a step, not the steps. The trainer counts
// all three in equivalent samples (a sample times its step's sample efficiency, so not whole
// numbers under an adaptive B): the cosine then follows the progress the job counts its length
// in, as AdaScale's schedule follows its scale-invariant iterations. Counted in steps,
// a batch that grows x16 halfway through the first epoch shortens the job's remaining steps
// x16 at once, and the cosine jumped from its start to nearly its middle in one step (the rate
// halved). With one global batch throughout this is LearningRateAt exactly; after a change the
// warmup's samples are counted at the current batch (warmup_steps × global_batch), a few
// percent of the data for a short warmup. Warmup and step decay count steps, as in
// LearningRateAt.
double LearningRateAtSample(double base, const ScheduleOptions& options, int64_t step,
                            double samples_done, double total_samples, double global_batch);

}  // namespace fulcrum::trainer
