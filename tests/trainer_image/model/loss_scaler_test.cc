// Dynamic loss scaling follows torch.cuda.amp.GradScaler: an overflow halves the scale and
// skips the step; growth_interval good steps in a row double it; an overflow restarts the count.
#include "trainer_image/trainer/model/loss_scaler.h"

#include <gtest/gtest.h>

namespace fulcrum::trainer {
namespace {

TEST(LossScaler, AnOverflowSkipsTheStepAndHalvesTheScale) {
  LossScaler scaler(1024.0, 3);
  EXPECT_FALSE(scaler.Update(false));
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 512.0);
}

TEST(LossScaler, GrowthIntervalGoodStepsInARowDoubleTheScale) {
  LossScaler scaler(1024.0, 3);
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_FALSE(scaler.Update(false));  // the count starts again
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 512.0);
  EXPECT_TRUE(scaler.Update(true));
  EXPECT_EQ(scaler.scale(), 1024.0);
}

TEST(LossScaler, ItsStateIsATensorSoItTravelsWithTheTrainingState) {
  LossScaler scaler(1024.0, 3);
  scaler.Update(false);
  LossScaler newcomer(65536.0, 3);
  newcomer.state().copy_(scaler.state());  // what the state broadcast does
  EXPECT_EQ(newcomer.scale(), 512.0);
}

}  // namespace
}  // namespace fulcrum::trainer
