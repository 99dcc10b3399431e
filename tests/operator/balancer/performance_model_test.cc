// The compute-time model c(b) = s·g(b): recovers a and k from noisy reports, shrugs off one-off
// outliers, follows a real change of speed within a few reports (only when a size it already
// measured contradicts its history), keeps and rescales what it measured, uses measured
// per-size times where the line is wrong, and says when a and k are separable.
#include "operator/balancer/performance_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

namespace fulcrum::balancer {
namespace {

// ResNet-50-like profiles from bench/scenarios (A100, V100) and one with a large fixed cost.
// The T4 profile's fixed cost is ~3% of its step at batch 256 and is not identifiable to 3%
// from 50 steps at 5% noise by any estimator; docs/balancer.md shows the numbers.
const LinearCost kProfiles[] = {{0.034, 0.000272}, {0.034, 0.000701}, {0.1, 0.001}};
const LinearCost kCatalogPrior{0.0, 0.001};

double RelativeError(double estimate, double truth) {
  return std::abs(estimate / truth - 1.0);
}

TEST(ComputeTimeModel, RecoversAAndKWithin3PercentFrom50ObservationsWith5PercentNoise) {
  // Every timing within ±5% of the truth; batches alternate between the two ends of the range
  // the planner explores.
  for (const LinearCost& truth : kProfiles) {
    for (int seed = 0; seed < 200; ++seed) {
      std::mt19937_64 random(seed);
      std::uniform_real_distribution<double> noise(-0.05, 0.05);
      ComputeTimeModel model(kCatalogPrior);
      for (int i = 0; i < 50; ++i) {
        const double batch = i % 2 == 0 ? 256 : 16;
        ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (1 + noise(random))).ok());
      }
      EXPECT_LT(RelativeError(model.estimate().fixed_seconds, truth.fixed_seconds), 0.03)
          << "a=" << truth.fixed_seconds << " seed " << seed;
      EXPECT_LT(RelativeError(model.estimate().seconds_per_sample, truth.seconds_per_sample), 0.03)
          << "k=" << truth.seconds_per_sample << " seed " << seed;
    }
  }
}

TEST(ComputeTimeModel, PredictsStepTimeWithin3PercentOnTypicalGaussianNoise) {
  // Gaussian noise with 5% standard deviation, batches spread over [16, 256]: the median
  // trial's worst error over that range stays within 3%.
  for (const LinearCost& truth : kProfiles) {
    std::vector<double> worst_errors;
    for (int seed = 0; seed < 200; ++seed) {
      std::mt19937_64 random(seed);
      std::normal_distribution<double> noise(0.0, 0.05);
      std::uniform_int_distribution<int> batches(16, 256);
      ComputeTimeModel model(kCatalogPrior);
      for (int i = 0; i < 50; ++i) {
        const int batch = batches(random);
        ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (1 + noise(random))).ok());
      }
      double worst = 0.0;
      for (int batch = 16; batch <= 256; ++batch) {
        worst =
            std::max(worst, RelativeError(model.estimate().Seconds(batch), truth.Seconds(batch)));
      }
      worst_errors.push_back(worst);
    }
    std::nth_element(worst_errors.begin(), worst_errors.begin() + 100, worst_errors.end());
    EXPECT_LT(worst_errors[100], 0.03);
  }
}

TEST(ComputeTimeModel, FirstObservationSetsTheScaleOfTheCatalogPrior) {
  ComputeTimeModel model({0.0, 1.0});
  ASSERT_TRUE(model.Observe(100, 0.5).ok());
  EXPECT_NEAR(model.estimate().Seconds(100), 0.5, 1e-12);
}

TEST(ComputeTimeModel, IgnoresAOneOffPause) {
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model(kCatalogPrior);
  for (int i = 0; i < 40; ++i) {
    const double batch = 100 + (i % 2 == 0 ? 10 : -10);
    ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch)).ok());
  }
  Result<ObservationOutcome> outcome = model.Observe(110, 3 * truth.Seconds(110));
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, ObservationOutcome::kOutlier);
  ASSERT_TRUE(model.Observe(110, truth.Seconds(110)).ok());
  EXPECT_NEAR(model.estimate().Seconds(100), truth.Seconds(100), 0.001 * truth.Seconds(100));
  EXPECT_EQ(model.regime(), 0);
}

// 40 noiseless reports alternating between batch 90 and 110, enough to identify a and k.
ComputeTimeModel MeasuredAt90And110(const LinearCost& truth) {
  ComputeTimeModel model(kCatalogPrior);
  for (int i = 0; i < 40; ++i) {
    const double batch = 100 + (i % 2 == 0 ? 10 : -10);
    EXPECT_TRUE(model.Observe(batch, truth.Seconds(batch)).ok());
  }
  EXPECT_TRUE(model.identified());
  return model;
}

TEST(ComputeTimeModel, FollowsARealTwofoldSlowdownAtAMeasuredSizeAfterThreeReports) {
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  std::vector<ObservationOutcome> outcomes;
  for (int i = 0; i < 3; ++i) outcomes.push_back(*model.Observe(110, 2 * truth.Seconds(110)));
  EXPECT_EQ(outcomes, (std::vector<ObservationOutcome>{ObservationOutcome::kOutlier,
                                                       ObservationOutcome::kOutlier,
                                                       ObservationOutcome::kRegimeChange}));
  EXPECT_NEAR(model.speed_factor(), 2.0, 1e-9);
  EXPECT_EQ(model.regime(), 1);
  EXPECT_NEAR(model.estimate().Seconds(100), 2 * truth.Seconds(100), 0.01 * truth.Seconds(100));
  // The shape (a : k) survives the change, so predictions at other batches are right too.
  EXPECT_NEAR(model.estimate().Seconds(200), 2 * truth.Seconds(200), 0.01 * truth.Seconds(200));
}

TEST(ComputeTimeModel, SeesASlowdownThatCoincidesWithASmallMoveToANewSize) {
  // The plan moved the worker from 110 to 112 just as it slowed down: 112 was never measured,
  // but 110 was, in this regime, and is within ±10%.
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  std::vector<ObservationOutcome> outcomes;
  for (int i = 0; i < 3; ++i) outcomes.push_back(*model.Observe(112, 6 * truth.Seconds(112)));
  EXPECT_EQ(outcomes.back(), ObservationOutcome::kRegimeChange);
  EXPECT_NEAR(model.speed_factor(), 6.0, 0.1);
}

TEST(ComputeTimeModel, SeesASlowdownThatCoincidesWithAMoveFarFromAnyMeasuredSize) {
  // The plan (or the dither) moved the worker from 110 to 160, a size never measured and none
  // within ±10%, just as it slowed down 6x (the Python runtime test's rank held new sizes for
  // 57 steps this way, each one's slow time taken for g there): no device takes more time per
  // sample at 160 than at 110. A 4x speed-up seen at a smaller new size, 40, takes less per
  // sample than 90 did.
  const LinearCost truth{0.02, 0.001};
  for (const auto& [landing, factor] : {std::pair{160, 6.0}, std::pair{40, 0.25}}) {
    ComputeTimeModel model = MeasuredAt90And110(truth);
    std::vector<ObservationOutcome> outcomes;
    for (int i = 0; i < 3; ++i) {
      outcomes.push_back(*model.Observe(landing, factor * truth.Seconds(landing)));
    }
    EXPECT_EQ(outcomes, (std::vector<ObservationOutcome>{ObservationOutcome::kOutlier,
                                                         ObservationOutcome::kOutlier,
                                                         ObservationOutcome::kRegimeChange}))
        << landing;
    EXPECT_EQ(model.regime(), 1);
    // The line's time there (within what the measured sizes allow) sizes the change.
    EXPECT_NEAR(model.speed_factor(), factor, 0.05 * factor) << landing;
  }
}

TEST(ComputeTimeModel, ANewSizeWithinWhatTheMeasuredSizesAllowIsNeverAChangeOfSpeed) {
  // Far from 90 and 110: a device flat below its knee (batch 10 as long as 90), a small-batch
  // penalty (batch 2 twice as long as 90), and a time per sample 20% higher at 4x the batch
  // (caches): what g does there, not a speed change.
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(*model.Observe(10, truth.Seconds(90)), ObservationOutcome::kAccepted);
    EXPECT_EQ(*model.Observe(2, 2 * truth.Seconds(90)), ObservationOutcome::kAccepted);
    EXPECT_EQ(*model.Observe(440, 1.2 * 4 * truth.Seconds(110)), ObservationOutcome::kAccepted);
  }
  EXPECT_EQ(model.regime(), 0);
  EXPECT_DOUBLE_EQ(model.speed_factor(), 1.0);
}

TEST(ComputeTimeModel, RefinesTheSpeedFactorWithReportsAfterTheChange) {
  // The three confirming reports overstate the change (a contention spike each); the next
  // reports at the same size bring the factor back to what they say.
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Observe(110, 2.2 * truth.Seconds(110)).ok());
  ASSERT_EQ(model.regime(), 1);
  ASSERT_NEAR(model.speed_factor(), 2.2, 1e-9);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(model.Observe(110, 2.0 * truth.Seconds(110)).ok());
  EXPECT_NEAR(model.speed_factor(), 2.0, 1e-9);
  EXPECT_EQ(model.speed_evidence(), 11);
  // The new regime's times are rescaled with it: 110 is where it was measured.
  EXPECT_NEAR(model.Seconds(110), 2.0 * truth.Seconds(110), 0.01 * truth.Seconds(110));
}

// A worker whose change of speed was just confirmed (a warm-up's speed-up to x0.5, or
// contention's 25% slowdown) and that is then slowed 6x on a size a plan moved it to: the slow
// reports there imply a speed far outside the span of that change, so they are a new change,
// not the last one settling. Folded into the refinement's median they were absorbed (the
// Python runtime test's rank c read x0.96 for 30 steps).
TEST(ComputeTimeModel, ASlowdownRightAfterAChangeIsANewChange) {
  const LinearCost truth{0.02, 0.001};
  for (const double first : {0.5, 1.25}) {
    SCOPED_TRACE(first);
    ComputeTimeModel model = MeasuredAt90And110(truth);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Observe(110, first * truth.Seconds(110)).ok());
    ASSERT_EQ(model.regime(), 1);
    std::vector<ObservationOutcome> outcomes;
    for (int i = 0; i < 3; ++i) {
      outcomes.push_back(*model.Observe(70, 6 * first * truth.Seconds(70)));
    }
    EXPECT_EQ(outcomes, (std::vector<ObservationOutcome>{ObservationOutcome::kOutlier,
                                                         ObservationOutcome::kOutlier,
                                                         ObservationOutcome::kRegimeChange}));
    EXPECT_EQ(model.regime(), 2);
    EXPECT_NEAR(model.speed_factor(), 6 * first, 0.05 * 6 * first);
  }
}

TEST(ComputeTimeModel, ALandingWithinHalfAMeasuredSizeMeasuresTheSpeedAgain) {
  // Three reports at 2x confirm a change (a burst of contention); the plan that answers it
  // moves the worker 110 -> 70, 36% away from any size measured before, and the burst is over:
  // the reports there say the worker is back at its speed. A landing further than half the
  // batch from any size measured before is left to say what g is there.
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Observe(110, 2.0 * truth.Seconds(110)).ok());
  ASSERT_EQ(model.regime(), 1);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Observe(70, truth.Seconds(70)).ok());
  EXPECT_NEAR(model.speed_factor(), 1.0, 1e-9);
  EXPECT_EQ(model.regime(), 1);  // a refined speed, not a new regime
  EXPECT_NEAR(model.Seconds(110), truth.Seconds(110), 0.01 * truth.Seconds(110));

  ComputeTimeModel far = MeasuredAt90And110(truth);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(far.Observe(110, 2.0 * truth.Seconds(110)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(far.Observe(20, truth.Seconds(20)).ok());
  EXPECT_NEAR(far.speed_factor(), 2.0, 1e-9);
}

TEST(ComputeTimeModel, ATimeOffTheLineAtANewSizeUpdatesThatSizeNotTheSpeed) {
  // A device flat below a knee: batch 10 takes as long as batch 90, far above the line.
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(*model.Observe(10, truth.Seconds(90)), ObservationOutcome::kAccepted);
  }
  EXPECT_EQ(model.regime(), 0);
  EXPECT_DOUBLE_EQ(model.speed_factor(), 1.0);
  // Where it was measured, the curve says what was measured; elsewhere the line still holds.
  EXPECT_NEAR(model.Seconds(10), truth.Seconds(90), 0.02 * truth.Seconds(90));
  EXPECT_NEAR(model.Seconds(110), truth.Seconds(110), 0.02 * truth.Seconds(110));
  // Below the knee the curve is not extrapolated down the line (which would say 0.021 s).
  EXPECT_GT(model.Seconds(1), 0.9 * truth.Seconds(90));
}

TEST(ComputeTimeModel, AConfirmedChangeRescalesWhatWasMeasuredInsteadOfDeletingIt) {
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel model = MeasuredAt90And110(truth);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(model.Observe(10, truth.Seconds(90)).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(model.Observe(110, 6 * truth.Seconds(110)).ok());
  ASSERT_EQ(model.regime(), 1);
  ASSERT_NEAR(model.speed_factor(), 6.0, 1e-9);
  // Size 10 was measured only before the change: kept, and rescaled by the new speed.
  ASSERT_TRUE(model.sizes().Find(10).has_value());
  EXPECT_EQ(model.sizes().Find(10)->count, 5);
  EXPECT_NEAR(model.Seconds(10), 6 * truth.Seconds(90), 0.02 * 6 * truth.Seconds(90));
  // It cannot contradict itself in the new regime: its first new time replaces the old ones,
  // even one that is not 6 times slower (what an emulated slowdown does to a small batch).
  EXPECT_EQ(*model.Observe(10, 3 * truth.Seconds(90)), ObservationOutcome::kAccepted);
  EXPECT_EQ(model.regime(), 1);
  EXPECT_EQ(model.sizes().Find(10)->count, 1);
}

TEST(ComputeTimeModel, NoiseAtAMeasuredSizeIsNeverAChangeOfSpeed) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const LinearCost truth{0.02, 0.001};
    std::mt19937_64 random(seed);
    std::normal_distribution<double> noise(0.0, 0.05);
    ComputeTimeModel model(kCatalogPrior);
    for (int i = 0; i < 2000; ++i) {
      const double batch = i % 3 == 0 ? 16 : 64;
      ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (1 + noise(random))).ok());
    }
    EXPECT_EQ(model.regime(), 0);
  }
}

// 80 reports at batch 100 scattered by 30% (normal, seeded): a worker on heavily shared cores,
// whose 4-sigma outlier bar is then over 100%.
ComputeTimeModel MeasuredUnderHeavyNoise(FitterConfig config = {}) {
  ComputeTimeModel model(kCatalogPrior, config);
  std::mt19937_64 random(7);
  std::normal_distribution<double> noise(0.0, 0.3);
  for (int i = 0; i < 80; ++i) {
    EXPECT_TRUE(model.Observe(100, 0.1 * std::max(0.5, 1.0 + noise(random))).ok());
  }
  return model;
}

// Under heavy noise most reports of a real slowdown fall short of the outlier bar. Kept, they
// moved the size's median onto the new speed before three in a row contradicted it, and the
// slowdown was never seen (issue 25: the demo under a doubled CI load). Held in the run, six
// reports leaning one way confirm it, however few pass the bar.
TEST(ComputeTimeModel, ASlowdownMostOfWhoseReportsFallShortOfTheBarIsStillConfirmed) {
  for (const bool holding : {true, false}) {
    FitterConfig config;
    if (!holding) config.support_sigmas = config.outlier_sigmas;  // the rule before holding
    ComputeTimeModel model = MeasuredUnderHeavyNoise(config);
    const double sigma = model.noise();
    ASSERT_GT(config.outlier_sigmas * sigma, 0.8) << "not heavy noise";
    const int regime = model.regime();
    const double speed = model.speed_factor();
    const double typical = model.sizes().Find(100)->typical * speed;
    // Every other report passes the bar (5 sigmas); the rest lean the same way (3 sigmas).
    std::vector<ObservationOutcome> outcomes;
    for (int i = 0; i < 12 && model.regime() == regime; ++i) {
      const double sigmas = i % 2 == 0 ? 5.0 : 3.0;
      outcomes.push_back(*model.Observe(100, typical * (1.0 + sigmas * sigma)));
    }
    if (holding) {
      EXPECT_EQ(outcomes.size(), 6u);
      EXPECT_EQ(outcomes.back(), ObservationOutcome::kRegimeChange);
      // Sized by all six, not only the three past the bar.
      EXPECT_NEAR(model.speed_factor(), speed * (1.0 + 4.0 * sigma), 0.01 * speed);
    } else {
      EXPECT_EQ(model.regime(), regime) << "the old rule saw it: this test shows no holding";
    }
  }
}

// A run that confirms nothing sets its contradiction aside (a one-off pause) and keeps the
// reports held with it: they are measurements like any other.
TEST(ComputeTimeModel, ReportsHeldWithAOneOffPauseAreKeptWhenTheRunEnds) {
  ComputeTimeModel model = MeasuredUnderHeavyNoise();
  const double sigma = model.noise();
  const double typical = model.sizes().Find(100)->typical * model.speed_factor();
  const int regime = model.regime();
  const int count = model.sizes().Find(100)->count;
  EXPECT_EQ(*model.Observe(100, typical * (1.0 + 6.0 * sigma)), ObservationOutcome::kOutlier);
  EXPECT_EQ(*model.Observe(100, typical * (1.0 + 3.0 * sigma)), ObservationOutcome::kOutlier);
  EXPECT_EQ(*model.Observe(100, typical * (1.0 + 2.5 * sigma)), ObservationOutcome::kOutlier);
  EXPECT_EQ(model.sizes().Find(100)->count, count);
  EXPECT_EQ(*model.Observe(100, typical), ObservationOutcome::kAccepted);
  EXPECT_EQ(model.sizes().Find(100)->count, count + 3);
  EXPECT_EQ(model.regime(), regime);
}

TEST(ComputeTimeModel, IsIdentifiedOnlyOnceBatchSizesHaveSpread) {
  const LinearCost truth{0.02, 0.001};
  ComputeTimeModel steady(kCatalogPrior);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(steady.Observe(100, truth.Seconds(100)).ok());
  EXPECT_FALSE(steady.identified());

  ComputeTimeModel dithered(kCatalogPrior);
  for (int i = 0; i < 50 && !dithered.identified(); ++i) {
    const double batch = 100 + (i % 2 == 0 ? 20 : -20);
    ASSERT_TRUE(dithered.Observe(batch, truth.Seconds(batch)).ok());
  }
  EXPECT_TRUE(dithered.identified());
  EXPECT_NEAR(dithered.estimate().fixed_seconds, 0.02, 0.002);
}

TEST(ComputeTimeModel, KeepsItsShapeWhenTheBatchStopsMoving) {
  // Over many noise draws, not one.
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    // After identification, hundreds of reports at one batch must not drift a and k apart.
    const LinearCost truth{0.03, 0.001};
    std::mt19937_64 random(seed);
    std::normal_distribution<double> noise(0.0, 0.03);
    ComputeTimeModel model(kCatalogPrior);
    for (int i = 0; i < 500 && !model.identified(); ++i) {
      const double batch = 100 + (i % 2 == 0 ? 20 : -20);
      ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (1 + noise(random))).ok());
    }
    ASSERT_TRUE(model.identified());
    const LinearCost identified = model.estimate();
    for (int i = 0; i < 1000; ++i) {
      ASSERT_TRUE(model.Observe(100, truth.Seconds(100) * (1 + noise(random))).ok());
    }
    // Extrapolating to half and twice the batch stays within the identification's own error.
    EXPECT_LT(RelativeError(model.estimate().Seconds(200), identified.Seconds(200)), 0.05);
    EXPECT_LT(RelativeError(model.estimate().Seconds(50), identified.Seconds(50)), 0.05);
    // Identification pins k to ~10% (one standard error), so twice the batch is within ~2 of them.
    EXPECT_LT(RelativeError(identified.Seconds(200), truth.Seconds(200)), 0.10);
  }
}

TEST(ComputeTimeModel, AdoptsAShapeOnlyWhenItPinsKDownBetterThanItsOwnData) {
  const LinearCost truth{0.03, 0.001};
  ComputeTimeModel steady(kCatalogPrior);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(steady.Observe(100, truth.Seconds(100)).ok());
  ASSERT_FALSE(steady.identified());
  steady.AdoptShape(truth.Scaled(3.0), 0.05);
  EXPECT_TRUE(steady.identified());
  // The shape is the adopted one, the level this worker's own.
  EXPECT_NEAR(steady.estimate().fixed_seconds, truth.fixed_seconds, 1e-3 * truth.fixed_seconds);
  EXPECT_NEAR(steady.estimate().seconds_per_sample, truth.seconds_per_sample,
              1e-3 * truth.seconds_per_sample);

  ComputeTimeModel dithered(kCatalogPrior);
  for (int i = 0; i < 200; ++i) {
    const double batch = 100 + (i % 2 == 0 ? 50 : -50);
    ASSERT_TRUE(dithered.Observe(batch, truth.Seconds(batch)).ok());
  }
  dithered.AdoptShape({0.0, 0.0013}, 0.05);  // a worse shape: the worker's own data win
  EXPECT_NEAR(dithered.estimate().fixed_seconds, truth.fixed_seconds, 0.01 * truth.fixed_seconds);
}

// On shared cores timings are noisy (the e2e Python job's workers), and a batch measured 10-15%
// slower than a bigger one at another time is noise there, not a device that runs small
// batches slowly: it must not pin the worker. A 1.8x slower batch still does. (Beyond twice a
// bigger batch's time, and the noise, a time is a change of speed instead: smaller_batch_slack,
// and SlowerThanTwiceABiggerBatchIsAChangeOfSpeedNotTheDevicesShape below.)
TEST(ComputeTimeModel, NoisyTimingsDoNotMakeABatchLookSlowerThanABiggerOne) {
  ComputeTimeModel model(kCatalogPrior);
  std::mt19937_64 random(7);
  std::normal_distribution<double> noise(0.0, 0.06);
  const auto noisy = [&](double seconds) {
    return seconds * (1.0 + std::clamp(noise(random), -0.12, 0.12));
  };
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(model.Observe(16, noisy(0.1)).ok());
  ASSERT_GT(model.noise(), 0.03) << "the model must have measured the noise";
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(model.Observe(8, 0.11).ok());
  EXPECT_EQ(model.MinimumUsefulBatch(), 1)
      << "8 at 1.1x of 16 (and 1.12x of its typical time) is within this worker's noise";
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(model.Observe(4, 0.18).ok());
  EXPECT_EQ(model.MinimumUsefulBatch(), 8) << "4 at 1.8x of 16 is slower than any noise";
}

// A time at a batch below one measured in this regime can exceed that one's (a device that runs
// tiny batches slowly), but not several times over: that is the worker slowing down as it moved
// (the Python job's rank c, slowed 6x on the first step of its move to 23 samples, was never
// answered when such times simply became the new size's history).
TEST(ComputeTimeModel, SlowerThanTwiceABiggerBatchIsAChangeOfSpeedNotTheDevicesShape) {
  ComputeTimeModel model(kCatalogPrior);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(model.Observe(40, 0.1).ok());
  const int regime = model.regime();
  // 23 samples, 6x slower than its share of 40's time (about 3.5x 40's whole step).
  std::vector<ObservationOutcome> outcomes;
  for (int i = 0; i < 3; ++i) outcomes.push_back(*model.Observe(23, 6.0 * 0.1 * 23 / 40));
  EXPECT_EQ(outcomes.back(), ObservationOutcome::kRegimeChange);
  EXPECT_GT(model.regime(), regime);
  EXPECT_GT(model.speed_factor(), 3.0);
}

// A trainer's start-up (a wait no batch size scales) fitted the line with a big fixed cost; its
// later times, at other sizes, were all far off it and kept as those sizes' own, so the line
// never moved and the start-up's sizes bent the planning curve for good (the demo's V100 ran at 9
// of its 27 samples for 270 steps). Once no report has reached the line for stale_after_reports,
// it is refitted to the sizes measured since, and the start-up's sizes no longer count.
TEST(ComputeTimeModel, ALineFittedToStartUpTimesIsRefittedToTheSizesMeasuredSince) {
  const LinearCost start_up{0.13, 0.0016};
  const LinearCost truth{0.012, 0.0044};
  ComputeTimeModel model(kCatalogPrior);
  for (int i = 0; i < 24; ++i) {
    const int batch = i % 2 == 0 ? 20 : 36;
    ASSERT_TRUE(model.Observe(batch, start_up.Seconds(batch) * (i % 3 == 0 ? 1.01 : 0.99)).ok());
  }
  ASSERT_TRUE(model.identified());
  const int stale_after = FitterConfig{}.stale_after_reports;
  for (int i = 0; i < stale_after + 10; ++i) {
    const int batch = i % 2 == 0 ? 1 : 9;
    ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (i % 3 == 0 ? 1.01 : 0.99)).ok());
    if (i == stale_after / 2) {
      // Not yet: a size the worker left a few reports ago still says what it takes.
      EXPECT_TRUE(model.sizes().Find(20).has_value());
      EXPECT_GT(model.estimate().fixed_seconds, 0.1);
    }
  }
  EXPECT_LT(RelativeError(model.Seconds(18), truth.Seconds(18)), 0.1) << model.Seconds(18);
  EXPECT_FALSE(model.sizes().Find(20).has_value());
  EXPECT_FALSE(model.sizes().Find(36).has_value());
  EXPECT_TRUE(model.sizes().Find(9).has_value());
}

// Sizes the line still agrees with count however long ago they were measured: a worker that
// returns to them (the others, once a slowed worker recovers) moves onto measured sizes in one
// plan.
TEST(ComputeTimeModel, SizesMeasuredLongAgoThatTheLineAgreesWithStillCount) {
  const LinearCost truth{0.034, 0.000701};
  ComputeTimeModel model(kCatalogPrior);
  for (int i = 0; i < 24; ++i) {
    const int batch = i % 2 == 0 ? 16 : 64;
    ASSERT_TRUE(model.Observe(batch, truth.Seconds(batch) * (i % 3 == 0 ? 1.01 : 0.99)).ok());
  }
  for (int i = 0; i < 4 * FitterConfig{}.stale_after_reports; ++i) {
    ASSERT_TRUE(model.Observe(32, truth.Seconds(32) * (i % 3 == 0 ? 1.01 : 0.99)).ok());
  }
  EXPECT_TRUE(model.sizes().Find(16).has_value());
  EXPECT_TRUE(model.sizes().Find(64).has_value());
}

TEST(ComputeTimeModel, RejectsNonFiniteOrNonPositiveReports) {
  ComputeTimeModel model(kCatalogPrior);
  EXPECT_EQ(model.Observe(0, 1.0).error().field, "batch");
  EXPECT_EQ(model.Observe(10, std::nan("")).error().field, "compute_seconds");
  EXPECT_EQ(model.Observe(10, -1.0).error().field, "compute_seconds");
  EXPECT_EQ(model.observations(), 0);
}

}  // namespace
}  // namespace fulcrum::balancer
