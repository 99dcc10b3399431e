// `equal` is DDP: the same local batch everywhere, whatever the speeds.
#include "operator/balancer/equal_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/balancer/planner.h"

namespace fulcrum::balancer {
namespace {

using ::testing::ElementsAre;

std::vector<int> Batches(const Plan& plan) {
  std::vector<int> batches;
  for (const WorkerAssignment& w : plan.workers) batches.push_back(w.batch);
  return batches;
}

TEST(EqualPolicy, GivesEveryWorkerTheSameBatchRegardlessOfSpeed) {
  PlanRequest request{
      96, {{"a", 0.0, 0.001, 1, 96, 0}, {"b", 0.0, 0.01, 1, 96, 0}, {"c", 0.5, 0.1, 1, 96, 0}}};
  Result<Plan> plan = MakePlan(request, EqualPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(Batches(*plan), ElementsAre(32, 32, 32));
}

TEST(EqualPolicy, GivesTheRemainderOneSampleEachToTheFirstWorkers) {
  PlanRequest request{
      10, {{"a", 0.0, 0.001, 1, 10, 0}, {"b", 0.0, 0.001, 1, 10, 0}, {"c", 0.0, 0.001, 1, 10, 0}}};
  Result<Plan> plan = MakePlan(request, EqualPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(Batches(*plan), ElementsAre(4, 3, 3));
}

TEST(EqualPolicy, MovesWhatAWorkerCannotHoldToTheOthers) {
  PlanRequest request{
      90, {{"a", 0.0, 0.001, 1, 10, 0}, {"b", 0.0, 0.001, 1, 90, 0}, {"c", 0.0, 0.001, 1, 90, 0}}};
  Result<Plan> plan = MakePlan(request, EqualPolicy());
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(Batches(*plan), ElementsAre(10, 40, 40));
}

}  // namespace
}  // namespace fulcrum::balancer
