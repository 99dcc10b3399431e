#include "operator/balancer/planner.h"

#include <algorithm>
#include <cstdint>

#include "operator/balancer/measures.h"
#include "operator/balancer/plan_validation.h"

namespace fulcrum::balancer {
namespace {

int64_t SumOfMaxBatches(const PlanRequest& request) {
  int64_t sum = 0;
  for (const WorkerSpec& worker : request.workers) sum += worker.max_batch;
  return sum;
}

std::vector<int> CurrentBatches(const PlanRequest& request) {
  std::vector<int> current;
  current.reserve(request.workers.size());
  for (const WorkerSpec& worker : request.workers) current.push_back(worker.current_batch);
  return current;
}

}  // namespace

int RequiredAccumulationSteps(const PlanRequest& request) {
  const int64_t capacity = SumOfMaxBatches(request);
  if (capacity <= 0 || capacity >= request.global_batch) return 1;
  return static_cast<int>((request.global_batch + capacity - 1) / capacity);
}

std::vector<SplitWorker> SplitWorkersFor(const PlanRequest& request, int accumulation_steps) {
  std::vector<SplitWorker> split;
  split.reserve(request.workers.size());
  for (const WorkerSpec& worker : request.workers) {
    const int64_t step_capacity = static_cast<int64_t>(worker.max_batch) * accumulation_steps;
    // s micro-steps of m samples cost s·c(m): a measured point moves to (s·m, s·c(m)).
    std::vector<CostPoint> measured;
    for (const CostPoint& point : worker.measured) {
      measured.push_back({point.batch * accumulation_steps, point.seconds * accumulation_steps});
    }
    split.push_back({worker.fixed_seconds * accumulation_steps, worker.seconds_per_sample,
                     worker.min_batch,
                     static_cast<int>(std::min<int64_t>(step_capacity, request.global_batch)),
                     MonotoneCostPoints(std::move(measured))});
  }
  return split;
}

double PredictStepSeconds(const PlanRequest& request, std::span<const int> batches,
                          int accumulation_steps) {
  return BottleneckCost(SplitWorkersFor(request, accumulation_steps), batches) +
         request.tail_seconds;
}

Result<Plan> MakePlan(const PlanRequest& request, const Policy& policy) {
  if (Status status = ValidatePlanRequest(request); !status.ok()) return status.error();
  const int accumulation_steps = RequiredAccumulationSteps(request);
  const std::vector<SplitWorker> split = SplitWorkersFor(request, accumulation_steps);
  const std::vector<int> current = CurrentBatches(request);

  Result<std::vector<int>> batches = policy.Split({split, current, request.global_batch});
  if (!batches.ok()) return batches.error();
  // X_UB is the optimum for the same B and the same accumulation; the optimal policy's own
  // answer is that optimum, so it is not solved twice.
  Result<std::vector<int>> best =
      policy.kind() == PolicyKind::kOptimal ? batches : MinMaxSplit(split, request.global_batch);
  if (!best.ok()) return best.error();

  Plan plan;
  plan.policy = policy.kind();
  plan.global_batch = request.global_batch;
  plan.accumulation_steps = accumulation_steps;
  std::vector<double> compute_seconds;
  compute_seconds.reserve(split.size());
  for (std::size_t i = 0; i < split.size(); ++i) {
    const int batch = (*batches)[i];
    compute_seconds.push_back(SplitCost(split[i], batch));
    plan.workers.push_back({request.workers[i].id, batch,
                            (batch + accumulation_steps - 1) / accumulation_steps,
                            compute_seconds.back()});
  }
  plan.step_seconds = BottleneckCost(split, *batches) + request.tail_seconds;
  plan.ideal_step_seconds = BottleneckCost(split, *best) + request.tail_seconds;
  plan.samples_per_second = SamplesPerSecond(request.global_batch, plan.step_seconds);
  plan.ideal_samples_per_second = SamplesPerSecond(request.global_batch, plan.ideal_step_seconds);
  plan.efficiency = BalanceEfficiency(plan.samples_per_second, plan.ideal_samples_per_second);
  plan.idle_fraction = IdleFraction(compute_seconds);
  return plan;
}

}  // namespace fulcrum::balancer
