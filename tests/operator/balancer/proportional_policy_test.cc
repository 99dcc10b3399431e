// `proportional` shares B in proportion to each worker's throughput at its current batch.
#include "operator/balancer/proportional_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/balancer/planner.h"

namespace fulcrum::balancer {
namespace {

TEST(ProportionalPolicy, SharesInProportionToThroughputAtTheCurrentBatch) {
  // At batch 100: x = 100/(0.1 + 0.1) = 500/s and 100/(0.0 + 0.4) = 250/s -> 2 : 1.
  PlanRequest request{300, {{"fast", 0.1, 0.001, 1, 300, 100}, {"slow", 0.0, 0.004, 1, 300, 100}}};
  Result<Plan> plan = MakePlan(request, ProportionalPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->workers[0].batch, 200);
  EXPECT_EQ(plan->workers[1].batch, 100);
}

TEST(ProportionalPolicy, UsesTheEqualShareAsReferenceBeforeAnyPlan) {
  PlanRequest request{300, {{"fast", 0.0, 0.001, 1, 300, 0}, {"slow", 0.0, 0.002, 1, 300, 0}}};
  Result<Plan> plan = MakePlan(request, ProportionalPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->workers[0].batch, 200);
  EXPECT_EQ(plan->workers[1].batch, 100);
}

TEST(ProportionalPolicy, IgnoresFixedCostsSoItIsNotOptimalInOneShot) {
  // At the current 100 / 300: 333 and 500 samples/s -> 160 / 240, costing 0.36 s and 0.48 s;
  // the optimum 200 / 200 costs 0.4 s.
  PlanRequest request{400, {{"a", 0.2, 0.001, 1, 400, 100}, {"b", 0.0, 0.002, 1, 400, 300}}};
  Result<Plan> plan = MakePlan(request, ProportionalPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_LT(plan->efficiency, 0.99);
}

}  // namespace
}  // namespace fulcrum::balancer
