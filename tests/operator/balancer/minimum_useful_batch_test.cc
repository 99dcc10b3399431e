#include "operator/balancer/minimum_useful_batch.h"

#include <gtest/gtest.h>

namespace fulcrum::balancer {
namespace {

void ObserveTimes(MinimumUsefulBatch& useful, int batch, double seconds, int times = 3) {
  for (int i = 0; i < times; ++i) useful.Observe(batch, seconds);
}

TEST(MinimumUsefulBatch, IsOneWhileEveryBatchIsFasterThanTheBiggerOnes) {
  MinimumUsefulBatch useful;
  for (int batch : {1, 2, 4, 8, 16, 32}) ObserveTimes(useful, batch, 0.01 + 0.001 * batch);
  EXPECT_EQ(useful.Minimum(), 1);
}

TEST(MinimumUsefulBatch, ABatchSlowerThanOneTwiceAsBigAndAllBelowItAreNotWorthGiving) {
  // CPU-like: batch 1 and 2 take longer than batch 8 (threads left idle), then the line holds.
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 1, 0.030);
  ObserveTimes(useful, 2, 0.028);
  ObserveTimes(useful, 8, 0.020);
  ObserveTimes(useful, 16, 0.030);
  // 2 is slower than 8 (which is not slower than 16): 1 and 2 are pathological, 3 to 7 unknown,
  // 8 the smallest size measured to be fine.
  EXPECT_EQ(useful.Minimum(), 8);
}

TEST(MinimumUsefulBatch, OnlyATimeOffFromItsSizesHistoryContradictsIt) {
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 8, 0.020);
  EXPECT_FALSE(useful.Contradicts(8, 0.021)) << "within the margin: noise";
  EXPECT_TRUE(useful.Contradicts(8, 0.040)) << "twice as slow at the same size: a new speed";
  EXPECT_FALSE(useful.Contradicts(1, 0.040)) << "a size never measured contradicts nothing";
}

TEST(MinimumUsefulBatch, OnePauseDoesNotMakeABatchPathological) {
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 4, 0.014, 4);
  useful.Observe(4, 0.050);  // a GC pause: the median of the last five ignores it
  ObserveTimes(useful, 8, 0.018);
  EXPECT_EQ(useful.Minimum(), 1);
}

TEST(MinimumUsefulBatch, NeighbouringSizesWithinTheMarginAreNoise) {
  // Fixed-cost dominated: 40 and 44 samples take about the same; 10% apart is timing noise,
  // and 44 is not twice 40 anyway.
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 40, 0.105);
  ObserveTimes(useful, 44, 0.100);
  ObserveTimes(useful, 80, 0.099);  // twice as big, within the 10% margin
  EXPECT_EQ(useful.Minimum(), 1);
}

TEST(MinimumUsefulBatch, ASizeSeenOnceOrTwiceDoesNotCountYet) {
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 1, 0.050, 2);
  ObserveTimes(useful, 8, 0.020);
  EXPECT_EQ(useful.Minimum(), 1);
  useful.Observe(1, 0.050);
  EXPECT_EQ(useful.Minimum(), 8);
}

TEST(MinimumUsefulBatch, ASpeedChangeForgetsWhatWasMeasured) {
  MinimumUsefulBatch useful;
  ObserveTimes(useful, 1, 0.050);
  ObserveTimes(useful, 8, 0.020);
  ASSERT_EQ(useful.Minimum(), 8);
  useful.Reset();
  EXPECT_EQ(useful.Minimum(), 1);
}

TEST(MinimumUsefulBatch, KeepsOnlyTheMostRecentlySeenSizes) {
  MinimumUsefulBatch useful({.max_batch_sizes = 2});
  ObserveTimes(useful, 1, 0.050);
  ObserveTimes(useful, 8, 0.020);
  ASSERT_EQ(useful.Minimum(), 8);
  ObserveTimes(useful, 16, 0.030);  // 1 is the least recently seen: dropped
  EXPECT_EQ(useful.Minimum(), 1);
}

}  // namespace
}  // namespace fulcrum::balancer
