// The measures of quality from DESIGN.md.
#include "operator/balancer/measures.h"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum::balancer {
namespace {

TEST(IdleFraction, IsZeroWhenEveryoneFinishesTogether) {
  const std::vector<double> seconds = {0.2, 0.2, 0.2};
  EXPECT_DOUBLE_EQ(IdleFraction(seconds), 0.0);
}

TEST(IdleFraction, CountsTheTimeFastWorkersWait) {
  const std::vector<double> seconds = {0.1, 0.2};  // 1 − 0.3 / (2 · 0.2)
  EXPECT_DOUBLE_EQ(IdleFraction(seconds), 0.25);
  EXPECT_DOUBLE_EQ(IdleFraction({}), 0.0);
}

TEST(BalanceEfficiency, IsMeasuredOverIdealThroughput) {
  EXPECT_DOUBLE_EQ(BalanceEfficiency(900, 1000), 0.9);
  EXPECT_DOUBLE_EQ(BalanceEfficiency(900, 0), 0.0);
  EXPECT_DOUBLE_EQ(SamplesPerSecond(512, 0.5), 1024);
  EXPECT_DOUBLE_EQ(SamplesPerSecond(512, 0.0), 0.0);
}

}  // namespace
}  // namespace fulcrum::balancer
