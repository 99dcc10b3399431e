// The learning-rate schedule: a linear warmup, then constant, cosine or step decay; a pure
// function of the step, so every rank computes the same rate.
#include "trainer_image/trainer/model/learning_rate_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fulcrum::trainer {
namespace {

TEST(LearningRateSchedule, WarmupRampsLinearlyToTheBaseRate) {
  const ScheduleOptions warmup{.kind = ScheduleKind::kConstant, .warmup_steps = 4};
  EXPECT_DOUBLE_EQ(LearningRateAt(0.8, warmup, 0, 100), 0.2);
  EXPECT_DOUBLE_EQ(LearningRateAt(0.8, warmup, 2, 100), 0.6);
  EXPECT_DOUBLE_EQ(LearningRateAt(0.8, warmup, 3, 100), 0.8);
  EXPECT_DOUBLE_EQ(LearningRateAt(0.8, warmup, 50, 100), 0.8);
}

TEST(LearningRateSchedule, CosineGoesFromTheBaseAfterWarmupToTheFinalFactorAtTheLastStep) {
  const ScheduleOptions cosine{
      .kind = ScheduleKind::kCosine, .warmup_steps = 10, .final_factor = 0.1};
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, cosine, 10, 110), 1.0);
  EXPECT_NEAR(LearningRateAt(1.0, cosine, 109, 110), 0.1, 1e-12);
  // Halfway through the decay, halfway between the two.
  EXPECT_NEAR(LearningRateAt(1.0, cosine, 59, 110), 0.55, 0.02);
  for (int64_t step = 11; step < 110; ++step) {
    EXPECT_LT(LearningRateAt(1.0, cosine, step, 110), LearningRateAt(1.0, cosine, step - 1, 110));
  }
  // A job trained until stopped has no last step: the base rate holds.
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, cosine, 500, 0), 1.0);
}

TEST(LearningRateSchedule, AnEpochJobWithOneGlobalBatchDecaysExactlyAsItsSteps) {
  const ScheduleOptions cosine{
      .kind = ScheduleKind::kCosine, .warmup_steps = 5, .final_factor = 0.1};
  // 1000 samples at 32 a step: 32 steps, the last one partial.
  constexpr int64_t kSamples = 1000;
  constexpr int64_t kBatch = 32;
  for (int64_t step = 0; step < 32; ++step) {
    EXPECT_EQ(LearningRateAtSample(0.5, cosine, step, step * kBatch, kSamples, kBatch),
              LearningRateAt(0.5, cosine, step, 32))
        << "step " << step;
  }
}

TEST(LearningRateSchedule, AnEpochJobsCosineFollowsItsSamplesWhenTheGlobalBatchGrows) {
  const ScheduleOptions cosine{
      .kind = ScheduleKind::kCosine, .warmup_steps = 5, .final_factor = 0.0};
  constexpr int64_t kSamples = 54000;  // 6 epochs of 9,000
  // 100 steps of 32, then the batch grows x16 (an adaptive global batch).
  const int64_t samples_done = 100 * 32;
  const double before = LearningRateAtSample(1.0, cosine, 100, samples_done, kSamples, 32);
  const double after = LearningRateAtSample(1.0, cosine, 100, samples_done, kSamples, 512);
  // 6% of the samples are done: the cosine is still near its start either way.
  EXPECT_GT(before, 0.98);
  EXPECT_GT(after, 0.98);
  // Counted in steps the same job would be 100 steps into 199 and the rate would halve at once.
  const int64_t steps_left_at_512 = (kSamples - samples_done + 511) / 512;
  EXPECT_LT(LearningRateAt(1.0, cosine, 100, 100 + steps_left_at_512), 0.55);
  // Halfway through the samples, halfway down; at the last batch, the final factor.
  EXPECT_NEAR(LearningRateAtSample(1.0, cosine, 150, kSamples / 2, kSamples, 512), 0.5, 0.05);
  EXPECT_NEAR(LearningRateAtSample(1.0, cosine, 200, kSamples - kSamples % 512, kSamples, 512), 0.0,
              1e-9);
}

TEST(LearningRateSchedule, TheCosineFollowsEquivalentSamplesThatAreNotWholeNumbers) {
  const ScheduleOptions cosine{.kind = ScheduleKind::kCosine, .final_factor = 0.0};
  // An adaptive B of 512 whose samples are each worth 0.37 of one at B0: a step adds 189.44
  // equivalent samples, and the job ends when they cover 54,000.
  constexpr double kStep = 512 * 0.37;
  constexpr double kTotal = 54000;
  const double last_step_start = std::ceil(kTotal / kStep) * kStep - kStep;
  EXPECT_DOUBLE_EQ(LearningRateAtSample(1.0, cosine, 0, 0.0, kTotal, kStep), 1.0);
  EXPECT_NEAR(LearningRateAtSample(1.0, cosine, 142, last_step_start / 2, kTotal, kStep), 0.5,
              1e-12);
  EXPECT_NEAR(LearningRateAtSample(1.0, cosine, 285, last_step_start, kTotal, kStep), 0.0, 1e-12);
}

TEST(LearningRateSchedule, StepDecayMultipliesByGammaEveryStepSizeStepsAfterWarmup) {
  const ScheduleOptions decay{
      .kind = ScheduleKind::kStep, .warmup_steps = 2, .step_size = 5, .gamma = 0.5};
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, decay, 2, 100), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, decay, 6, 100), 1.0);
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, decay, 7, 100), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(1.0, decay, 17, 100), 0.125);
}

TEST(LearningRateSchedule, BadSettingsAreRefusedNamingTheFlag) {
  EXPECT_EQ(ValidateSchedule({.kind = ScheduleKind::kStep}).error().field, "--lr-step-size");
  EXPECT_EQ(ValidateSchedule({.warmup_steps = -1}).error().field, "--warmup-steps");
  EXPECT_EQ(ValidateSchedule({.final_factor = 2.0}).error().field, "--lr-final-factor");
  EXPECT_TRUE(ValidateSchedule({.kind = ScheduleKind::kCosine, .warmup_steps = 100}).ok());
}

}  // namespace
}  // namespace fulcrum::trainer
