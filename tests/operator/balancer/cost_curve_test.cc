// The measured curve: measured times where they exist, straight lines between them, the line's
// slope above them, flat-at-most-the-line's-slope below them; never decreasing.
#include "operator/balancer/cost_curve.h"

#include <gtest/gtest.h>

#include <vector>

namespace fulcrum::balancer {
namespace {

TEST(CostCurve, IsTheLineWithoutMeasuredPoints) {
  EXPECT_DOUBLE_EQ(CurveSeconds(0.01, 0.001, {}, 40), 0.05);
}

TEST(CostCurve, UsesMeasuredTimesAtTheirSizesAndInterpolatesBetween) {
  const std::vector<CostPoint> points = MonotoneCostPoints({{64, 0.2}, {16, 0.1}});
  EXPECT_DOUBLE_EQ(CurveSeconds(0.0, 0.001, points, 16), 0.1);
  EXPECT_DOUBLE_EQ(CurveSeconds(0.0, 0.001, points, 64), 0.2);
  EXPECT_DOUBLE_EQ(CurveSeconds(0.0, 0.001, points, 40), 0.15);
}

TEST(CostCurve, ExtrapolatesUpWithTheLinesSlope) {
  const std::vector<CostPoint> points = MonotoneCostPoints({{16, 0.1}, {64, 0.2}});
  EXPECT_DOUBLE_EQ(CurveSeconds(0.0, 0.001, points, 164), 0.3);
}

TEST(CostCurve, IsFlatBelowAMeasuredKneeNotTheLineDownToZero) {
  // A device flat below 32: 8 and 32 measured the same. The line through the big batches
  // would put batch 1 at a few milliseconds; the curve keeps it at what 8 took.
  const std::vector<CostPoint> points = MonotoneCostPoints({{8, 0.04}, {32, 0.04}, {64, 0.07}});
  EXPECT_DOUBLE_EQ(CurveSeconds(0.008, 0.001, points, 1), 0.04);
}

TEST(CostCurve, BelowTheFirstPointFallsAtMostWithTheLinesSlopeAndStaysPositive) {
  const std::vector<CostPoint> steep = MonotoneCostPoints({{10, 0.1}, {20, 0.5}});
  // The secant (0.04 s/sample) is clamped to the line's 0.001 s/sample.
  EXPECT_DOUBLE_EQ(CurveSeconds(0.0, 0.001, steep, 5), 0.095);
  const std::vector<CostPoint> one = MonotoneCostPoints({{10, 0.01}});
  EXPECT_GT(CurveSeconds(0.0, 0.01, one, 1), 0.0);
}

TEST(CostCurve, MonotonePointsNeverCostMoreThanABiggerBatch) {
  const std::vector<CostPoint> points =
      MonotoneCostPoints({{32, 0.12}, {8, 0.05}, {16, 0.13}, {16, 0.2}, {0, 1.0}});
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points[0], (CostPoint{8, 0.05}));
  EXPECT_EQ(points[1], (CostPoint{16, 0.12}));
  EXPECT_EQ(points[2], (CostPoint{32, 0.12}));
  for (int batch = 1; batch < 100; ++batch) {
    EXPECT_LE(CurveSeconds(0.01, 0.001, points, batch),
              CurveSeconds(0.01, 0.001, points, batch + 1));
  }
}

}  // namespace
}  // namespace fulcrum::balancer
