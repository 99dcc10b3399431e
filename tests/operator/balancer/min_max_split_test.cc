// The split solver is exact: over a generated family of small instances its bottleneck equals
// the one found by trying every integer split.
#include "operator/balancer/min_max_split.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace fulcrum::balancer {
namespace {

// Tries every integer split; the reference the solver is held to.
double ExhaustiveBestBottleneck(const std::vector<SplitWorker>& workers, int total) {
  double best = std::numeric_limits<double>::infinity();
  std::vector<int> batches(workers.size());
  auto search = [&](auto&& self, std::size_t index, int remaining, double bottleneck) -> void {
    if (bottleneck >= best) return;
    if (index + 1 == workers.size()) {
      if (remaining < workers[index].lo || remaining > workers[index].hi) return;
      best = std::min(best, std::max(bottleneck, SplitCost(workers[index], remaining)));
      return;
    }
    for (int b = workers[index].lo; b <= std::min(workers[index].hi, remaining); ++b) {
      self(self, index + 1, remaining - b, std::max(bottleneck, SplitCost(workers[index], b)));
    }
  };
  search(search, 0, total, 0.0);
  return best;
}

struct Instance {
  std::vector<SplitWorker> workers;
  int total;
};

// N <= 5 workers, B <= 48, random a and k, random bounds (some 0 minimums, tight maximums),
// always feasible.
Instance RandomInstance(std::mt19937_64& random) {
  std::uniform_int_distribution<int> worker_count(1, 5);
  std::uniform_real_distribution<double> fixed(0.0, 0.2);
  std::uniform_real_distribution<double> per_sample(0.001, 0.05);
  std::uniform_int_distribution<int> min_batch(0, 4);
  std::uniform_int_distribution<int> extra(0, 30);
  Instance instance;
  instance.workers.resize(worker_count(random));
  int lo_sum = 0;
  int hi_sum = 0;
  for (SplitWorker& w : instance.workers) {
    w.fixed_seconds = random() % 4 == 0 ? 0.0 : fixed(random);
    w.seconds_per_sample = per_sample(random);
    w.lo = min_batch(random);
    w.hi = w.lo + extra(random);
    lo_sum += w.lo;
    hi_sum += w.hi;
  }
  std::uniform_int_distribution<int> total(std::max(1, lo_sum), std::max(1, std::min(48, hi_sum)));
  instance.total = total(random);
  if (instance.total < lo_sum || instance.total > hi_sum) instance.total = lo_sum;
  return instance;
}

TEST(MinMaxSplit, MatchesExhaustiveSearchOnEveryGeneratedInstance) {
  std::mt19937_64 random(20240604);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const Instance instance = RandomInstance(random);
    if (instance.total < 1) continue;
    Result<std::vector<int>> split = MinMaxSplit(instance.workers, instance.total);
    ASSERT_TRUE(split.ok()) << split.error().ToString();
    const double exhaustive = ExhaustiveBestBottleneck(instance.workers, instance.total);
    ASSERT_DOUBLE_EQ(BottleneckCost(instance.workers, *split), exhaustive) << "trial " << trial;
    ++checked;
  }
  EXPECT_GT(checked, 2500);
}

TEST(MinMaxSplit, IsExactOnMeasuredCurvesToo) {
  // The same instances with a few measured points per worker (flat knees, points above and
  // below the line): the curve start and the greedy refinement stay exact.
  std::mt19937_64 random(20261126);
  std::uniform_real_distribution<double> off_line(0.3, 3.0);
  int checked = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Instance instance = RandomInstance(random);
    if (instance.total < 1) continue;
    for (SplitWorker& w : instance.workers) {
      std::vector<CostPoint> points;
      for (int i = 0; i < 3; ++i) {
        const int batch = 1 + static_cast<int>(random() % 40);
        points.push_back(
            {batch, (w.fixed_seconds + w.seconds_per_sample * batch) * off_line(random)});
      }
      w.measured = MonotoneCostPoints(points);
    }
    Result<std::vector<int>> split = MinMaxSplit(instance.workers, instance.total);
    ASSERT_TRUE(split.ok()) << split.error().ToString();
    const double exhaustive = ExhaustiveBestBottleneck(instance.workers, instance.total);
    ASSERT_DOUBLE_EQ(BottleneckCost(instance.workers, *split), exhaustive) << "trial " << trial;
    EXPECT_EQ(std::accumulate(split->begin(), split->end(), 0), instance.total);
    ++checked;
  }
  EXPECT_GT(checked, 2500);
}

TEST(MinMaxSplit, EqualWorkersGetEqualShares) {
  const std::vector<SplitWorker> workers(4, SplitWorker{0.01, 0.002, 1, 100});
  Result<std::vector<int>> split = MinMaxSplit(workers, 64);
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(*split, ::testing::Each(16));
}

TEST(MinMaxSplit, TwiceAsFastWorkerGetsTwiceTheSamples) {
  const std::vector<SplitWorker> workers = {{0.0, 0.001, 1, 1000}, {0.0, 0.002, 1, 1000}};
  Result<std::vector<int>> split = MinMaxSplit(workers, 300);
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(*split, ::testing::ElementsAre(200, 100));
}

TEST(MinMaxSplit, KeepsSumExactAndBoundsWhenMaximumsBind) {
  const std::vector<SplitWorker> workers = {{0.0, 0.001, 1, 10}, {0.0, 0.01, 1, 1000}};
  Result<std::vector<int>> split = MinMaxSplit(workers, 100);
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(*split, ::testing::ElementsAre(10, 90));
}

TEST(MinMaxSplit, LeavesAWorkerThatCannotHelpIdleWhenItsMinimumIsZero) {
  // Worker 1's fixed cost alone exceeds what worker 0 needs for the whole batch.
  const std::vector<SplitWorker> workers = {{0.0, 0.001, 0, 1000}, {5.0, 0.001, 0, 1000}};
  Result<std::vector<int>> split = MinMaxSplit(workers, 100);
  ASSERT_TRUE(split.ok());
  EXPECT_THAT(*split, ::testing::ElementsAre(100, 0));
}

TEST(MinMaxSplit, ReportsInfeasibleWhenBoundsCannotHoldTheTotal) {
  const std::vector<SplitWorker> workers = {{0.0, 0.001, 1, 10}, {0.0, 0.001, 1, 10}};
  Result<std::vector<int>> too_many = MinMaxSplit(workers, 21);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().code, ErrorCode::kInfeasible);
  Result<std::vector<int>> too_few = MinMaxSplit(workers, 1);
  ASSERT_FALSE(too_few.ok());
  EXPECT_EQ(too_few.error().code, ErrorCode::kInfeasible);
}

TEST(ContinuousWaterLevel, FillsExactlyTheTotal) {
  const std::vector<SplitWorker> workers = {{0.1, 0.01, 0, 50}, {0.0, 0.02, 0, 50}};
  const double level = ContinuousWaterLevel(workers, 60);
  double filled = 0.0;
  for (const SplitWorker& w : workers) {
    filled +=
        std::clamp((level - w.fixed_seconds) / w.seconds_per_sample, double(w.lo), double(w.hi));
  }
  EXPECT_NEAR(filled, 60.0, 1e-9);
}

TEST(MinMaxSplit, LargeInstanceStaysWithinBoundsAndSumsExactly) {
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> per_sample(0.0005, 0.005);
  std::vector<SplitWorker> workers(10000);
  for (SplitWorker& w : workers) w = {0.02, per_sample(random), 1, 400};
  Result<std::vector<int>> split = MinMaxSplit(workers, 1'000'000);
  ASSERT_TRUE(split.ok());
  EXPECT_EQ(std::accumulate(split->begin(), split->end(), int64_t{0}), 1'000'000);
  for (std::size_t i = 0; i < workers.size(); ++i) {
    ASSERT_GE((*split)[i], workers[i].lo);
    ASSERT_LE((*split)[i], workers[i].hi);
  }
}

}  // namespace
}  // namespace fulcrum::balancer
