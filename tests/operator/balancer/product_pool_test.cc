// Pooling same-product workers: a shared shape from all members' data, levels shrunk toward
// the group by how little each worker's own data say, and workers that are really different
// left on their own.
#include "operator/balancer/product_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace fulcrum::balancer {
namespace {

const LinearCost kA100{0.034, 0.000272};
const LinearCost kCatalogPrior{0.0, 0.0003};

double RelativeError(double estimate, double truth) {
  return std::abs(estimate / truth - 1.0);
}

// `count` workers reporting `steps` noisy steps each at batch 300 ± `dither` (alternating).
std::vector<ComputeTimeModel> Observed(const std::vector<double>& slowdowns, int steps,
                                       double dither, double noise, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<double> jitter(0.0, noise);
  std::vector<ComputeTimeModel> models;
  for (std::size_t w = 0; w < slowdowns.size(); ++w) {
    ComputeTimeModel model(kCatalogPrior);
    for (int i = 0; i < steps; ++i) {
      const double batch = 300 + ((i + w) % 2 == 0 ? dither : -dither);
      EXPECT_TRUE(
          model.Observe(batch, slowdowns[w] * kA100.Seconds(batch) * (1 + jitter(random))).ok());
    }
    models.push_back(std::move(model));
  }
  return models;
}

std::vector<const ComputeTimeModel*> Pointers(const std::vector<ComputeTimeModel>& models) {
  std::vector<const ComputeTimeModel*> pointers;
  for (const ComputeTimeModel& model : models) pointers.push_back(&model);
  return pointers;
}

TEST(ProductPool, PooledDataPinTheShapeBeforeAnyOneWorkersDataDo) {
  const std::vector<ComputeTimeModel> models =
      Observed(std::vector<double>(16, 1.0), 10, 30, 0.05, 1);
  for (const ComputeTimeModel& model : models) EXPECT_FALSE(model.identified());
  const PooledEstimate pooled = PoolSameProduct(Pointers(models), {}, {});
  ASSERT_TRUE(pooled.shape.has_value());
  EXPECT_LE(pooled.shape_slope_error, 0.10);
  EXPECT_LT(RelativeError(pooled.shape->seconds_per_sample, kA100.seconds_per_sample), 0.2);
}

TEST(ProductPool, ShrinkingTowardTheGroupCutsTheErrorOfIdenticalWorkers) {
  double own_error = 0.0;
  double pooled_error = 0.0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<ComputeTimeModel> models =
        Observed(std::vector<double>(8, 1.0), 10, 0, 0.05, seed);
    const PooledEstimate pooled = PoolSameProduct(Pointers(models), {}, {});
    for (std::size_t i = 0; i < models.size(); ++i) {
      own_error +=
          std::pow(RelativeError(models[i].estimate().Seconds(300), kA100.Seconds(300)), 2);
      pooled_error += std::pow(RelativeError(pooled.costs[i].Seconds(300), kA100.Seconds(300)), 2);
    }
  }
  EXPECT_LT(std::sqrt(pooled_error), 0.7 * std::sqrt(own_error));
}

TEST(ProductPool, AWorkerFarFromItsGroupKeepsItsOwnEstimateAndDoesNotPullTheOthers) {
  const std::vector<ComputeTimeModel> models =
      Observed({1.0, 1.0, 1.0, 2.0, 1.0, 1.0}, 20, 0, 0.05, 2);
  const PooledEstimate pooled = PoolSameProduct(Pointers(models), {}, {});
  EXPECT_EQ(pooled.on_its_own, (std::vector<bool>{false, false, false, true, false, false}));
  EXPECT_EQ(pooled.costs[3].Seconds(300), models[3].estimate().Seconds(300));
  EXPECT_LT(RelativeError(pooled.costs[0].Seconds(300), kA100.Seconds(300)), 0.03);
}

TEST(ProductPool, SpreadComesFromTheMembersWhenTheyReallyDiffer) {
  const std::vector<double> levels = {0.94, 0.97, 1.0, 1.03, 1.06, 0.95, 1.0, 1.05};
  const std::vector<ComputeTimeModel> models = Observed(levels, 50, 0, 0.01, 3);
  const PooledEstimate pooled = PoolSameProduct(Pointers(models), {}, {});
  EXPECT_GT(pooled.spread, 0.03);
  // With spread this large and precise own data, each worker keeps its own level.
  for (std::size_t i = 0; i < levels.size(); ++i) {
    EXPECT_LT(RelativeError(pooled.costs[i].Seconds(300), levels[i] * kA100.Seconds(300)), 0.01);
  }
}

TEST(ProductPool, AWorkerWithoutReportsCostsWhatItsGroupDoes) {
  std::vector<ComputeTimeModel> models = Observed({1.0, 1.0, 1.0}, 20, 0, 0.02, 4);
  models.emplace_back(kCatalogPrior);
  const PooledEstimate pooled = PoolSameProduct(Pointers(models), {}, {});
  EXPECT_LT(RelativeError(pooled.costs[3].Seconds(300), kA100.Seconds(300)), 0.02);
}

}  // namespace
}  // namespace fulcrum::balancer
