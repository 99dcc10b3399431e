// `optimal` makes every worker finish computing at (nearly) the same time.
#include "operator/balancer/optimal_policy.h"

#include <gtest/gtest.h>

#include "operator/balancer/planner.h"

namespace fulcrum::balancer {
namespace {

TEST(OptimalPolicy, EqualisesComputeTimesAcrossAHeterogeneousCluster) {
  // Roughly A100 / V100 / T4 ratios from bench/scenarios/mixed16.yaml.
  PlanRequest request{1000,
                      {{"a100", 0.034, 0.000272, 1, 1000, 0},
                       {"v100", 0.034, 0.000701, 1, 1000, 0},
                       {"t4", 0.018, 0.00228, 1, 1000, 0}}};
  Result<Plan> plan = MakePlan(request, OptimalPolicy());
  ASSERT_TRUE(plan.ok());
  double slowest = 0.0;
  double fastest = 1e9;
  for (const WorkerAssignment& w : plan->workers) {
    slowest = std::max(slowest, w.compute_seconds);
    fastest = std::min(fastest, w.compute_seconds);
  }
  EXPECT_LT(slowest - fastest, 0.00228 + 1e-12);  // within one T4 sample
}

TEST(OptimalPolicy, BeatsOrTiesEveryOtherSplitOnTheSameInput) {
  PlanRequest request{512,
                      {{"x", 0.05, 0.001, 1, 512, 0},
                       {"y", 0.01, 0.002, 1, 512, 0},
                       {"z", 0.00, 0.004, 1, 512, 0}}};
  Result<Plan> optimal = MakePlan(request, OptimalPolicy());
  Result<Plan> equal = MakePlan(request, *MakePolicy(PolicyKind::kEqual));
  Result<Plan> proportional = MakePlan(request, *MakePolicy(PolicyKind::kProportional));
  ASSERT_TRUE(optimal.ok() && equal.ok() && proportional.ok());
  EXPECT_LE(optimal->step_seconds, equal->step_seconds);
  EXPECT_LE(optimal->step_seconds, proportional->step_seconds);
}

}  // namespace
}  // namespace fulcrum::balancer
