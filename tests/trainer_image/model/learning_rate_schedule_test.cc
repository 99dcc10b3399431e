// The learning-rate schedule: a linear warmup, then constant, cosine or step decay; a pure
// function of the step, so every rank computes the same rate.
#include "trainer_image/trainer/model/learning_rate_schedule.h"

#include <gtest/gtest.h>

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
