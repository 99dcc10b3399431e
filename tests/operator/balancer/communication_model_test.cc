// The all-reduce tail is the straggler's own comm time, robust to one-off spikes.
#include "operator/balancer/communication_model.h"

#include <gtest/gtest.h>

namespace fulcrum::balancer {
namespace {

TEST(CommunicationModel, IsZeroBeforeAnyReport) {
  EXPECT_EQ(CommunicationModel().TailSeconds(), 0.0);
}

TEST(CommunicationModel, TakesEachStepsSmallestCommTime) {
  // Fast workers wait for the straggler, so their comm time includes that wait.
  CommunicationModel model;
  for (int step = 0; step < 10; ++step) {
    model.Observe(step, 0.30);
    model.Observe(step, 0.02);
    model.Observe(step, 0.15);
  }
  EXPECT_DOUBLE_EQ(model.TailSeconds(), 0.02);
}

TEST(CommunicationModel, IgnoresASpikeInOneStep) {
  CommunicationModel model;
  for (int step = 0; step < 20; ++step) model.Observe(step, step == 7 ? 1.0 : 0.02);
  EXPECT_DOUBLE_EQ(model.TailSeconds(), 0.02);
}

}  // namespace
}  // namespace fulcrum::balancer
