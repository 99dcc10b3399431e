// The planner's contract for every policy: the batches sum to B, stay in bounds, accumulation
// appears only when memory forces it, and bad input is an error, never a wrong plan.
#include "operator/balancer/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "operator/balancer/optimal_policy.h"

namespace fulcrum::balancer {
namespace {

using ::testing::HasSubstr;

constexpr PolicyKind kAllPolicies[] = {PolicyKind::kOptimal, PolicyKind::kProportional,
                                       PolicyKind::kEqual};

PlanRequest RandomRequest(std::mt19937_64& random) {
  std::uniform_int_distribution<int> worker_count(1, 40);
  std::uniform_real_distribution<double> fixed(0.0, 0.1);
  std::uniform_real_distribution<double> per_sample(0.0002, 0.01);
  std::uniform_int_distribution<int> min_batch(0, 3);
  std::uniform_int_distribution<int> room(1, 300);
  std::uniform_int_distribution<int> current(0, 64);
  PlanRequest request;
  request.workers.resize(worker_count(random));
  int64_t min_sum = 0;
  int64_t max_sum = 0;
  for (std::size_t i = 0; i < request.workers.size(); ++i) {
    WorkerSpec& w = request.workers[i];
    w.id = "w" + std::to_string(i);
    w.fixed_seconds = fixed(random);
    w.seconds_per_sample = per_sample(random);
    w.min_batch = min_batch(random);
    w.max_batch = w.min_batch + room(random);
    w.current_batch = current(random);
    min_sum += w.min_batch;
    max_sum += w.max_batch;
  }
  // Half the instances need more samples than memory holds at once.
  std::uniform_int_distribution<int64_t> total(std::max<int64_t>(1, min_sum), 2 * max_sum);
  request.global_batch = static_cast<int>(total(random));
  request.tail_seconds = fixed(random);
  return request;
}

int64_t SumOfMax(const PlanRequest& request) {
  int64_t sum = 0;
  for (const WorkerSpec& w : request.workers) sum += w.max_batch;
  return sum;
}

TEST(MakePlan, EveryPolicyKeepsTheGlobalBatchAndBoundsOnThousandsOfRandomInstances) {
  std::mt19937_64 random(42);
  for (int trial = 0; trial < 3000; ++trial) {
    const PlanRequest request = RandomRequest(random);
    for (PolicyKind kind : kAllPolicies) {
      Result<Plan> plan = MakePlan(request, *MakePolicy(kind));
      ASSERT_TRUE(plan.ok()) << plan.error().ToString();
      const bool needs_accumulation = SumOfMax(request) < request.global_batch;
      ASSERT_EQ(plan->accumulation_steps > 1, needs_accumulation) << "trial " << trial;
      int64_t sum = 0;
      for (std::size_t i = 0; i < request.workers.size(); ++i) {
        const WorkerAssignment& assignment = plan->workers[i];
        const WorkerSpec& worker = request.workers[i];
        ASSERT_EQ(assignment.id, worker.id);
        ASSERT_GE(assignment.batch, worker.min_batch);
        ASSERT_LE(assignment.micro_batch, worker.max_batch);
        ASSERT_LE(assignment.batch, int64_t{worker.max_batch} * plan->accumulation_steps);
        sum += assignment.batch;
      }
      ASSERT_EQ(sum, request.global_batch) << ToString(kind) << " trial " << trial;
      ASSERT_LE(plan->ideal_step_seconds, plan->step_seconds * (1 + 1e-12));
      ASSERT_LE(plan->efficiency, 1.0 + 1e-12);
      ASSERT_GT(plan->efficiency, 0.0);
    }
  }
}

TEST(MakePlan, OptimalPlanIsItsOwnUpperBound) {
  PlanRequest request{96, {{"a", 0.01, 0.001, 1, 96, 0}, {"b", 0.02, 0.003, 1, 96, 0}}, 0.005};
  Result<Plan> plan = MakePlan(request, *MakePolicy(PolicyKind::kOptimal));
  ASSERT_TRUE(plan.ok());
  EXPECT_DOUBLE_EQ(plan->efficiency, 1.0);
  EXPECT_DOUBLE_EQ(plan->ideal_samples_per_second, 96 / plan->step_seconds);
  EXPECT_EQ(plan->accumulation_steps, 1);
}

TEST(MakePlan, AccumulatesOnlyWhenMemoryCannotHoldTheGlobalBatch) {
  PlanRequest request{100, {{"a", 0.0, 0.001, 1, 30, 0}, {"b", 0.0, 0.001, 1, 30, 0}}};
  Result<Plan> plan = MakePlan(request, *MakePolicy(PolicyKind::kOptimal));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->accumulation_steps, 2);  // 2 x (30 + 30) >= 100 > 60
  EXPECT_EQ(plan->workers[0].batch + plan->workers[1].batch, 100);
  request.global_batch = 60;
  plan = MakePlan(request, *MakePolicy(PolicyKind::kOptimal));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->accumulation_steps, 1);
}

TEST(MakePlan, RefusesWhenMemoryCannotHoldTheBatchAndAccumulationIsOff) {
  PlanRequest request{100, {{"a", 0.0, 0.001, 1, 30, 0}, {"b", 0.0, 0.001, 1, 30, 0}}};
  request.allow_accumulation = false;
  Result<Plan> plan = MakePlan(request, *MakePolicy(PolicyKind::kOptimal));
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::kInfeasible);
  EXPECT_THAT(plan.error().message, HasSubstr("enable accumulation"));
}

struct BadInput {
  const char* name;
  void (*spoil)(PlanRequest&);
  const char* field;
};

class MakePlanRejects : public ::testing::TestWithParam<BadInput> {};

TEST_P(MakePlanRejects, NamingTheField) {
  PlanRequest request{64, {{"a", 0.01, 0.001, 1, 64, 0}, {"b", 0.01, 0.002, 1, 64, 0}}};
  GetParam().spoil(request);
  for (PolicyKind kind : kAllPolicies) {
    Result<Plan> plan = MakePlan(request, *MakePolicy(kind));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().field, GetParam().field) << plan.error().ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(
    BadInputs, MakePlanRejects,
    ::testing::Values(
        BadInput{"NoWorkers", [](PlanRequest& r) { r.workers.clear(); }, "workers"},
        BadInput{"ZeroBatch", [](PlanRequest& r) { r.global_batch = 0; }, "global_batch"},
        BadInput{"NegativeFixed", [](PlanRequest& r) { r.workers[1].fixed_seconds = -1; },
                 "workers[1].fixed_seconds"},
        BadInput{"NanPerSample",
                 [](PlanRequest& r) { r.workers[0].seconds_per_sample = std::nan(""); },
                 "workers[0].seconds_per_sample"},
        BadInput{"ZeroPerSample", [](PlanRequest& r) { r.workers[0].seconds_per_sample = 0; },
                 "workers[0].seconds_per_sample"},
        BadInput{"InfiniteFixed",
                 [](PlanRequest& r) {
                   r.workers[0].fixed_seconds = std::numeric_limits<double>::infinity();
                 },
                 "workers[0].fixed_seconds"},
        BadInput{"NegativeMin", [](PlanRequest& r) { r.workers[1].min_batch = -1; },
                 "workers[1].min_batch"},
        BadInput{"MaxBelowMin", [](PlanRequest& r) { r.workers[1].max_batch = 0; },
                 "workers[1].max_batch"},
        BadInput{"EmptyId", [](PlanRequest& r) { r.workers[1].id.clear(); }, "workers[1].id"},
        BadInput{"DuplicateId", [](PlanRequest& r) { r.workers[1].id = "a"; }, "workers[1].id"},
        BadInput{"NanTail", [](PlanRequest& r) { r.tail_seconds = std::nan(""); }, "tail_seconds"},
        BadInput{"MinimumsAboveBatch", [](PlanRequest& r) { r.workers[0].min_batch = 64; },
                 "workers[].min_batch"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RequiredAccumulationSteps, IsTheFewestMicroStepsThatHoldTheBatch) {
  PlanRequest request{1000, {{"a", 0.0, 0.001, 1, 300, 0}, {"b", 0.0, 0.001, 1, 100, 0}}};
  EXPECT_EQ(RequiredAccumulationSteps(request), 3);
  request.global_batch = 400;
  EXPECT_EQ(RequiredAccumulationSteps(request), 1);
}

TEST(PredictStepSeconds, IsTheSlowestWorkerPlusTheTail) {
  PlanRequest request{30, {{"a", 0.1, 0.01, 1, 30, 0}, {"b", 0.0, 0.02, 1, 30, 0}}, 0.05};
  const std::vector<int> batches = {10, 20};
  EXPECT_DOUBLE_EQ(PredictStepSeconds(request, batches, 1), 0.4 + 0.05);
}

}  // namespace
}  // namespace fulcrum::balancer

namespace fulcrum::balancer {
namespace {

// Issue 25: a slowed worker whose fitted line puts batch 1 far above what it measured there.
// Planned on the line, it is pinned at its minimum; planned on what it measured, it keeps the
// samples it can take within the others' step time.
TEST(MakePlan, PlansAWorkerAtWhatItMeasuredWhereTheLineIsContradicted) {
  PlanRequest request;
  request.global_batch = 256;
  // The slowed worker's line: a = 0.3 s (a level that mixed in core contention).
  request.workers.push_back({"slowed", 0.3, 0.004, 1, 256, 0});
  request.workers.push_back({"other", 0.01, 0.001, 1, 256, 0});
  Result<Plan> on_line = MakePlan(request, OptimalPolicy());
  ASSERT_TRUE(on_line.ok());
  EXPECT_EQ(on_line->workers[0].batch, 1) << "the line says even one sample costs 0.3 s";
  // Measured: flat at 0.06 s up to 16, then on the way to the line.
  request.workers[0].measured = {{1, 0.06}, {8, 0.06}, {16, 0.06}, {64, 0.4}};
  Result<Plan> on_measured = MakePlan(request, OptimalPolicy());
  ASSERT_TRUE(on_measured.ok());
  EXPECT_GE(on_measured->workers[0].batch, 16);
  EXPECT_LT(on_measured->step_seconds, on_line->step_seconds);
  EXPECT_NEAR(on_measured->workers[0].compute_seconds,
              CurveSeconds(0.3, 0.004, MonotoneCostPoints(request.workers[0].measured),
                           on_measured->workers[0].batch),
              1e-12);
}

TEST(MakePlan, RejectsAMeasuredPointWithoutAPositiveBatchAndTime) {
  PlanRequest request;
  request.global_batch = 8;
  request.workers.push_back({"a", 0.01, 0.001, 1, 8, 0, {{0, 0.1}}});
  EXPECT_EQ(MakePlan(request, OptimalPolicy()).error().field, "workers[0].measured");
}

}  // namespace
}  // namespace fulcrum::balancer
