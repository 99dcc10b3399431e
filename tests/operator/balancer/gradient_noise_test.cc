// The gradient noise model recovers |G|², tr Σ and B_noise from synthetic gradients with known
// statistics, over ranks with unequal local batches, as trainers report them.
#include "operator/balancer/gradient_noise.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace fulcrum::balancer {
namespace {

// Per-sample gradients G + ε with ε ~ N(0, σ² I) in `dimensions` dimensions: |G|² = 1 and
// tr Σ = dimensions·σ². A rank's mean over b samples is G + N(0, σ²/b I), drawn directly.
class SyntheticGradients {
 public:
  SyntheticGradients(int dimensions, double trace_sigma, unsigned seed)
      : gradient_(dimensions, 1.0 / std::sqrt(static_cast<double>(dimensions))),
        sigma_(std::sqrt(trace_sigma / dimensions)),
        random_(seed) {}
  void SetTraceSigma(double trace_sigma) {
    sigma_ = std::sqrt(trace_sigma / static_cast<double>(gradient_.size()));
  }

  // One step: every rank's observation and the aggregated one (Σ b_i ĝ_i / B).
  std::pair<std::vector<GradientObservation>, GradientObservation> Step(
      const std::vector<int>& batches) {
    std::vector<GradientObservation> ranks;
    std::vector<double> global(gradient_.size(), 0.0);
    int total = 0;
    for (int batch : batches) {
      std::normal_distribution<double> noise(0.0, sigma_ / std::sqrt(static_cast<double>(batch)));
      double squared = 0.0;
      for (std::size_t k = 0; k < gradient_.size(); ++k) {
        const double value = gradient_[k] + noise(random_);
        squared += value * value;
        global[k] += batch * value;
      }
      ranks.push_back({batch, squared});
      total += batch;
    }
    double global_squared = 0.0;
    for (double value : global) global_squared += (value / total) * (value / total);
    return {ranks, {total, global_squared}};
  }

 private:
  std::vector<double> gradient_;
  double sigma_;
  std::mt19937_64 random_;
};

TEST(GradientNoiseModel,
     RecoversTheGradientNormTraceAndNoiseScaleWithin10PercentFromUnequalBatches) {
  // B_noise = 200 over local batches 3..40: the regime adaptive batching works in.
  SyntheticGradients gradients(/*dimensions=*/400, /*trace_sigma=*/200.0, /*seed=*/7);
  GradientNoiseModel model(/*half_life_steps=*/200.0);
  for (int step = 0; step < 600; ++step) {
    auto [ranks, global] = gradients.Step({3, 5, 8, 40});
    model.ObserveStep(ranks, global);
  }
  const std::optional<GradientNoiseEstimate> estimate = model.Estimate();
  ASSERT_TRUE(estimate.has_value());
  EXPECT_NEAR(estimate->gradient_squared, 1.0, 0.1);
  EXPECT_NEAR(estimate->trace_sigma, 200.0, 20.0);
  EXPECT_NEAR(estimate->noise_scale, 200.0, 20.0);
}

TEST(GradientNoiseModel, EqualLocalBatchesStillMeasureThroughTheGlobalBatch) {
  SyntheticGradients gradients(400, 50.0, 11);
  GradientNoiseModel model(200.0);
  for (int step = 0; step < 600; ++step) {
    auto [ranks, global] = gradients.Step({16, 16, 16});
    model.ObserveStep(ranks, global);
  }
  const std::optional<GradientNoiseEstimate> estimate = model.Estimate();
  ASSERT_TRUE(estimate.has_value());
  EXPECT_NEAR(estimate->noise_scale, 50.0, 5.0);
}

TEST(GradientNoiseModel, FollowsTheNoiseScaleAsItGrowsWithinAFewHalfLives) {
  SyntheticGradients gradients(400, 20.0, 3);
  GradientNoiseModel model(/*half_life_steps=*/50.0);
  for (int step = 0; step < 300; ++step) {
    auto [ranks, global] = gradients.Step({4, 8, 16});
    model.ObserveStep(ranks, global);
  }
  ASSERT_TRUE(model.Estimate().has_value());
  EXPECT_NEAR(model.Estimate()->noise_scale, 20.0, 3.0);
  gradients.SetTraceSigma(200.0);  // later in training: noise dominates more
  for (int step = 0; step < 400; ++step) {
    auto [ranks, global] = gradients.Step({4, 8, 16});
    model.ObserveStep(ranks, global);
  }
  EXPECT_NEAR(model.Estimate()->noise_scale, 200.0, 30.0);
}

TEST(GradientNoiseModel, NoEstimateFromOneBatchSizeOrBadObservations) {
  GradientNoiseModel model;
  // One rank: its batch is the global batch, every point has the same x.
  for (int step = 0; step < 50; ++step) {
    const GradientObservation only{32, 1.5};
    model.ObserveStep(std::span(&only, 1), only);
  }
  EXPECT_FALSE(model.Estimate().has_value());
  // Ranks with no samples, NaN or negative norms are left out, not fitted.
  model.Reset();
  const std::vector<GradientObservation> bad = {{0, 5.0}, {8, std::nan("")}, {8, -1.0}};
  model.ObserveStep(bad, {0, 1.0});
  EXPECT_FALSE(model.Estimate().has_value());
  // Noise only (|G|² fitted at or below 0): no noise scale rather than a negative or infinite one.
  model.Reset();
  for (int step = 0; step < 10; ++step) {
    const std::vector<GradientObservation> ranks = {{4, 10.0 / 4}, {8, 10.0 / 8}};
    model.ObserveStep(ranks, {12, 10.0 / 12});
  }
  EXPECT_FALSE(model.Estimate().has_value());
}

}  // namespace
}  // namespace fulcrum::balancer
