// Per-size times: the median of each size's recent times, tagged with the speed regime they
// were measured in, and the minimum useful batch that follows from them.
#include "operator/balancer/per_size_times.h"

#include <gtest/gtest.h>

namespace fulcrum::balancer {
namespace {

void ObserveTimes(PerSizeTimes& sizes, int batch, double seconds, int times = 3, int regime = 0) {
  for (int i = 0; i < times; ++i) sizes.Observe(batch, seconds, regime);
}

TEST(PerSizeTimes, MinimumUsefulIsOneWhileEveryBatchIsFasterThanTheBiggerOnes) {
  PerSizeTimes sizes;
  for (int batch : {1, 2, 4, 8, 16, 32}) ObserveTimes(sizes, batch, 0.01 + 0.001 * batch);
  EXPECT_EQ(sizes.MinimumUseful(), 1);
}

TEST(PerSizeTimes, ABatchSlowerThanABiggerOneAndAllBelowItAreNotWorthGiving) {
  // CPU-like: batch 1 and 2 take longer than batch 8 (threads left idle), then the line holds.
  PerSizeTimes sizes;
  ObserveTimes(sizes, 1, 0.030);
  ObserveTimes(sizes, 2, 0.028);
  ObserveTimes(sizes, 8, 0.020);
  ObserveTimes(sizes, 16, 0.030);
  // 2 is slower than 8 (which is not slower than 16): 1 and 2 are pathological, 3 to 7 unknown,
  // 8 the smallest size measured to be fine.
  EXPECT_EQ(sizes.MinimumUseful(), 8);
}

TEST(PerSizeTimes, OnePauseDoesNotMoveASizesTypicalTime) {
  PerSizeTimes sizes;
  ObserveTimes(sizes, 4, 0.014, 4);
  sizes.Observe(4, 0.050, 0);  // a GC pause: the median of the last five ignores it
  EXPECT_DOUBLE_EQ(sizes.Find(4)->typical, 0.014);
  ObserveTimes(sizes, 8, 0.018);
  EXPECT_EQ(sizes.MinimumUseful(), 1);
}

TEST(PerSizeTimes, ABatchSlowerThanANeighbourAFewSamplesBiggerIsNotWorthGivingEither) {
  // Flat-then-rising small-batch penalty (bench/scenarios/small_batch.yaml): 10 takes 30%
  // longer than 15, which is not twice as big.
  PerSizeTimes sizes;
  ObserveTimes(sizes, 10, 0.190);
  ObserveTimes(sizes, 15, 0.149);
  ObserveTimes(sizes, 19, 0.155);
  EXPECT_EQ(sizes.MinimumUseful(), 15);
}

TEST(PerSizeTimes, NeighbouringSizesWithinTheMarginAreNoise) {
  PerSizeTimes sizes;
  ObserveTimes(sizes, 40, 0.105);
  ObserveTimes(sizes, 44, 0.100);
  ObserveTimes(sizes, 80, 0.099);  // twice as big, within the 10% margin
  EXPECT_EQ(sizes.MinimumUseful(), 1);
}

TEST(PerSizeTimes, ASizeSeenOnceOrTwiceIsNotSettledYet) {
  PerSizeTimes sizes;
  ObserveTimes(sizes, 1, 0.050, 2);
  ObserveTimes(sizes, 8, 0.020);
  EXPECT_EQ(sizes.MinimumUseful(), 1);
  EXPECT_FALSE(sizes.SettledIn(1, 0));
  sizes.Observe(1, 0.050, 0);
  EXPECT_TRUE(sizes.SettledIn(1, 0));
  EXPECT_EQ(sizes.MinimumUseful(), 8);
}

TEST(PerSizeTimes, ASizeMeasuredOnlyInAnOlderRegimeIsKeptUntilItsFirstNewMeasurement) {
  PerSizeTimes sizes;
  ObserveTimes(sizes, 8, 0.020, 5, /*regime=*/0);
  ObserveTimes(sizes, 16, 0.030, 5, /*regime=*/0);
  // Regime 1 measures 16 again: only 16 starts over; 8 keeps its (rescaled) history.
  sizes.Observe(16, 0.036, 1);
  EXPECT_EQ(sizes.Find(16)->count, 1);
  EXPECT_DOUBLE_EQ(sizes.Find(16)->typical, 0.036);
  EXPECT_EQ(sizes.Find(8)->count, 5);
  EXPECT_EQ(sizes.Find(8)->regime, 0);
  EXPECT_TRUE(sizes.SettledIn(8, 0));
  EXPECT_FALSE(sizes.SettledIn(8, 1)) << "measured, but not in the current regime";
}

TEST(PerSizeTimes, MeasuredNearCountsSizesWithinTheTolerance) {
  PerSizeTimes sizes;
  sizes.Observe(100, 0.1, 0);
  EXPECT_TRUE(sizes.MeasuredNear(100, 0.1));
  EXPECT_TRUE(sizes.MeasuredNear(92, 0.1));
  EXPECT_FALSE(sizes.MeasuredNear(80, 0.1));
  EXPECT_FALSE(sizes.MeasuredNear(2, 0.1)) << "±1 sample at least, not ±10% of 100";
}

TEST(PerSizeTimes, MeasuredNearInARegimeCountsOnlySizesLastMeasuredInIt) {
  PerSizeTimes sizes;
  sizes.Observe(100, 0.1, 0);
  sizes.Observe(50, 0.2, 1);
  EXPECT_TRUE(sizes.MeasuredNear(100, 0.1, 0));
  EXPECT_FALSE(sizes.MeasuredNear(100, 0.1, 1)) << "only an older regime measured it";
  EXPECT_TRUE(sizes.MeasuredNear(52, 0.1, 1));
  EXPECT_TRUE(sizes.MeasuredNear(100, 0.1)) << "any regime";
}

TEST(PerSizeTimes, KeepsOnlyTheMostRecentlySeenSizes) {
  PerSizeTimes sizes({.max_batch_sizes = 2});
  ObserveTimes(sizes, 1, 0.050);
  ObserveTimes(sizes, 8, 0.020);
  ASSERT_EQ(sizes.MinimumUseful(), 8);
  ObserveTimes(sizes, 16, 0.030);  // 1 is the least recently seen: dropped
  EXPECT_EQ(sizes.MinimumUseful(), 1);
  EXPECT_FALSE(sizes.Find(1).has_value());
}

}  // namespace
}  // namespace fulcrum::balancer
