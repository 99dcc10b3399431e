// The adaptive global batch: on a simulated heterogeneous cluster the policy picks the B that
// maximises goodput = B / T*(B) × E(B), moves it only with hysteresis and never outside
// [min, max]; the learning rate follows by AdaScale's gain or the square-root rule.
#include "operator/balancer/adaptive_batch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fulcrum::balancer {
namespace {

using ::testing::HasSubstr;

// Workers with step costs a_i + k_i·b (EMULATED speeds 1, 2 and 4) and a split-independent
// tail: the optimal split finishes every worker together at t, so Σ (t - a_i) / k_i = B.
SplitStepSeconds SimulatedCluster(double max_batch = 1e9) {
  struct Worker {
    double fixed, per_sample;
  };
  const std::vector<Worker> workers = {{0.010, 0.001}, {0.012, 0.002}, {0.015, 0.004}};
  return [workers, max_batch](int batch) -> std::optional<double> {
    if (batch > max_batch) return std::nullopt;  // beyond memory
    double inverse = 0.0, offset = 0.0;
    for (const Worker& worker : workers) {
      inverse += 1.0 / worker.per_sample;
      offset += worker.fixed / worker.per_sample;
    }
    return (batch + offset) / inverse + 0.020;  // + all-reduce and optimizer
  };
}

double Goodput(double noise_scale, int base, int batch) {
  return batch / *SimulatedCluster()(batch) * StatisticalEfficiency(noise_scale, base, batch);
}

AdaptiveBatchOptions Options() {
  return {.min_batch = 32,
          .max_batch = 4096,
          .base_batch = 128,
          .min_steps_between_changes = 100,
          .max_factor = 2.0,
          .min_gain = 0.05};
}

TEST(AdaptiveBatch, PicksTheReachableBatchWithTheBestGoodput) {
  for (double noise_scale : {50.0, 400.0, 3000.0}) {
    const BatchDecision decision =
        DecideGlobalBatch(Options(), 128, 1000, noise_scale, SimulatedCluster());
    // Brute force over every reachable B (within x2 of 128, inside the bounds).
    int best = 128;
    for (int batch = 64; batch <= 256; ++batch) {
      if (Goodput(noise_scale, 128, batch) > Goodput(noise_scale, 128, best)) best = batch;
    }
    const double best_goodput = Goodput(noise_scale, 128, best);
    if (best_goodput < 1.05 * Goodput(noise_scale, 128, 128)) {
      EXPECT_FALSE(decision.changed) << noise_scale << ": " << decision.reason;
      continue;
    }
    ASSERT_TRUE(decision.changed) << noise_scale << ": " << decision.reason;
    // The candidate grid (24 per octave) finds the optimum's goodput to within 1%.
    EXPECT_GE(decision.goodput, 0.99 * best_goodput) << noise_scale << " best B " << best;
    EXPECT_NEAR(decision.goodput, Goodput(noise_scale, 128, decision.batch), 1e-9);
    EXPECT_THAT(decision.reason, HasSubstr("B 128 -> " + std::to_string(decision.batch)));
  }
}

TEST(AdaptiveBatch, SmallNoiseShrinksTheBatchAndLargeNoiseGrowsIt) {
  // Early in training (little noise) a large batch wastes samples; later it is nearly free.
  EXPECT_LT(DecideGlobalBatch(Options(), 512, 1000, 10.0, SimulatedCluster()).batch, 512);
  EXPECT_GT(DecideGlobalBatch(Options(), 128, 1000, 5000.0, SimulatedCluster()).batch, 128);
}

TEST(AdaptiveBatch, MovesOnlyAfterTheDwellByABoundedFactorAndForAGain) {
  const AdaptiveBatchOptions options = Options();
  const BatchDecision early = DecideGlobalBatch(options, 128, 99, 5000.0, SimulatedCluster());
  EXPECT_FALSE(early.changed);
  EXPECT_EQ(early.batch, 128);
  EXPECT_THAT(early.reason, HasSubstr("99 of 100 steps"));
  const BatchDecision moved = DecideGlobalBatch(options, 128, 100, 5000.0, SimulatedCluster());
  EXPECT_TRUE(moved.changed);
  EXPECT_LE(moved.batch, 256) << "at most x2 in one change";
  // At the optimum nothing moves: no reachable B gains min_gain.
  int optimum = 32;
  for (int batch = 32; batch <= 4096; ++batch) {
    if (Goodput(400.0, 128, batch) > Goodput(400.0, 128, optimum)) optimum = batch;
  }
  const BatchDecision settled =
      DecideGlobalBatch(options, optimum, 1000, 400.0, SimulatedCluster());
  EXPECT_FALSE(settled.changed) << settled.reason;
  AdaptiveBatchOptions strict = options;
  strict.min_gain = 10.0;
  const BatchDecision small_gain = DecideGlobalBatch(strict, 128, 1000, 5000.0, SimulatedCluster());
  EXPECT_FALSE(small_gain.changed);
  EXPECT_THAT(small_gain.reason, HasSubstr("gains"));
}

TEST(AdaptiveBatch, NeverLeavesTheBoundsAndBringsAnOutsideBatchInAtOnce) {
  AdaptiveBatchOptions options = Options();
  options.min_batch = 100;
  options.max_batch = 150;
  for (double noise_scale : {1.0, 100.0, 1e6}) {
    for (int current : {100, 120, 150}) {
      const BatchDecision decision =
          DecideGlobalBatch(options, current, 1000, noise_scale, SimulatedCluster());
      EXPECT_GE(decision.batch, 100);
      EXPECT_LE(decision.batch, 150);
    }
  }
  // The bounds were edited below the running B: inside now, whatever the dwell and the factor.
  const BatchDecision brought_in = DecideGlobalBatch(options, 1000, 0, 1e6, SimulatedCluster());
  EXPECT_TRUE(brought_in.changed);
  EXPECT_LE(brought_in.batch, 150);
  EXPECT_GE(brought_in.batch, 100);
  EXPECT_THAT(brought_in.reason, HasSubstr("outside [100, 150]"));
}

TEST(AdaptiveBatch, ABatchNoSplitCanHoldIsNeverChosen) {
  const BatchDecision decision =
      DecideGlobalBatch(Options(), 128, 1000, 1e6, SimulatedCluster(/*max_batch=*/200));
  EXPECT_LE(decision.batch, 200);
}

TEST(AdaptiveBatch, TheLearningRateFollowsAdaScalesGainOrTheSquareRoot) {
  // At B0 both leave it; AdaScale's gain lies between 1 and B/B0, near B/B0 when noise dominates.
  EXPECT_DOUBLE_EQ(ScaledLearningRate(LearningRateScaling::kAdaScale, 0.1, 128, 128, 500.0), 0.1);
  EXPECT_DOUBLE_EQ(ScaledLearningRate(LearningRateScaling::kSquareRoot, 0.1, 128, 512, 500.0), 0.2);
  const double noisy = ScaledLearningRate(LearningRateScaling::kAdaScale, 0.1, 128, 512, 1e6);
  const double clean = ScaledLearningRate(LearningRateScaling::kAdaScale, 0.1, 128, 512, 1.0);
  EXPECT_NEAR(noisy, 0.4, 0.001);
  EXPECT_NEAR(clean, 0.1 * 4 * (1.0 + 128) / (1.0 + 512), 1e-12);
  EXPECT_GT(clean, 0.1);
  EXPECT_NEAR(StatisticalEfficiency(100.0, 128, 128), 1.0, 1e-12);
}

}  // namespace
}  // namespace fulcrum::balancer
