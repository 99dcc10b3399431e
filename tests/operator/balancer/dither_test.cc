// Dither moves samples in pairs: the global batch and the bounds always hold, and the same
// inputs give the same batches.
#include "operator/balancer/dither.h"

#include <gtest/gtest.h>

#include <numeric>

namespace fulcrum::balancer {
namespace {

int Sum(const std::vector<int>& values) {
  return std::accumulate(values.begin(), values.end(), 0);
}

TEST(DitherBatches, KeepsTheSumAndBoundsForEveryStepAndSeed) {
  const std::vector<int> batches = {100, 50, 8, 1, 300};
  const std::vector<int> lo = {1, 1, 1, 1, 1};
  const std::vector<int> hi = {105, 400, 400, 400, 300};
  const std::vector<int> to_dither = {0, 1, 2, 3};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    for (int64_t step = 0; step < 50; ++step) {
      const std::vector<int> dithered =
          DitherBatches({batches, lo, hi, to_dither, step, seed, 0.1, 2});
      ASSERT_EQ(Sum(dithered), Sum(batches));
      for (std::size_t i = 0; i < batches.size(); ++i) {
        ASSERT_GE(dithered[i], lo[i]);
        ASSERT_LE(dithered[i], hi[i]);
      }
    }
  }
}

TEST(DitherBatches, AlternatesEachPeriodAndIsDeterministic) {
  const std::vector<int> batches = {100, 100};
  const std::vector<int> lo = {1, 1};
  const std::vector<int> hi = {200, 200};
  const std::vector<int> to_dither = {0, 1};
  const std::vector<int> first = DitherBatches({batches, lo, hi, to_dither, 0, 7, 0.1, 2});
  const std::vector<int> same = DitherBatches({batches, lo, hi, to_dither, 1, 7, 0.1, 2});
  const std::vector<int> next = DitherBatches({batches, lo, hi, to_dither, 2, 7, 0.1, 2});
  EXPECT_EQ(first, same);
  EXPECT_NE(first, next);
  EXPECT_EQ(std::abs(first[0] - 100), 10);
  EXPECT_EQ(first[0] + next[0], 200);
}

TEST(DitherBatches, PairsAnOddWorkerWithTheBusiestOther) {
  const std::vector<int> batches = {100, 400, 50};
  const std::vector<int> lo = {1, 1, 1};
  const std::vector<int> hi = {500, 500, 500};
  const std::vector<int> to_dither = {0};
  const std::vector<int> dithered = DitherBatches({batches, lo, hi, to_dither, 0, 0, 0.1, 2});
  EXPECT_EQ(dithered[2], 50);
  EXPECT_EQ(std::abs(dithered[0] - 100), 10);
  EXPECT_EQ(dithered[0] + dithered[1], 500);
}

}  // namespace
}  // namespace fulcrum::balancer
