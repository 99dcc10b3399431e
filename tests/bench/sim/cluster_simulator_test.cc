// The simulator against the real balancer on a device with a minimum efficient batch: the
// line c(b) = a + k·b puts the slow workers near batch 7, where a step takes longer than at
// 16. The balancer learns it from the reports and stops handing such batches out.
#include "bench/sim/cluster_simulator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace fulcrum::sim {
namespace {

Scenario SmallBatchScenario() {
  const char* root = std::getenv("FULCRUM_SOURCE_DIR");
  Result<Scenario> scenario =
      LoadScenario(std::string(root != nullptr ? root : ".") + "/bench/scenarios/small_batch.yaml");
  EXPECT_TRUE(scenario.ok()) << scenario.error().ToString();
  return *scenario;
}

TEST(ClusterSimulator, NoPolicyKeepsGivingABatchSlowerThanABiggerOne) {
  const Scenario scenario = SmallBatchScenario();
  for (const balancer::PolicyKind policy :
       {balancer::PolicyKind::kOptimal, balancer::PolicyKind::kProportional}) {
    const Result<PolicyRun> run = RunScenario(scenario, policy);
    ASSERT_TRUE(run.ok()) << run.error().ToString();
    // It takes a plan that gives a pathological batch, and three reports of it, to learn;
    // after that none, for the remaining ~380 steps.
    EXPECT_LE(run->pathological_steps, 10) << balancer::ToString(policy);
    EXPECT_LT(run->last_pathological_step, 30) << balancer::ToString(policy);
  }
}

TEST(ClusterSimulator, ALinearDeviceIsNeverCountedPathological) {
  Scenario scenario = SmallBatchScenario();
  scenario.profiles.at("P100").min_efficient_batch = 0;
  const Result<PolicyRun> run = RunScenario(scenario, balancer::PolicyKind::kOptimal);
  ASSERT_TRUE(run.ok()) << run.error().ToString();
  EXPECT_EQ(run->pathological_steps, 0);
  EXPECT_EQ(run->last_pathological_step, -1);
}

}  // namespace
}  // namespace fulcrum::sim
