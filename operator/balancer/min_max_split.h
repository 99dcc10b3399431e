// The exact integer min-max split: choose integers b_i in [lo_i, hi_i] with sum b_i = total
// that minimise max_i cost_i(b_i), where cost_i(b) = fixed_i + per_sample_i·b for b > 0, or the
// measured curve (cost_curve.h) where a worker has measured points, and 0 for b = 0 (a worker
// given nothing does not compute). Every policy is this solver applied to
// a different cost: the real one (optimal), 1/throughput per sample (proportional), 1 (equal).
#pragma once

#include <span>
#include <vector>

#include "common/result.h"
#include "operator/balancer/cost_curve.h"

namespace fulcrum::balancer {

struct SplitWorker {
  double fixed_seconds = 0.0;       // >= 0, finite
  double seconds_per_sample = 0.0;  // > 0, finite
  int lo = 0;                       // 0 <= lo <= hi
  int hi = 0;
  // Measured costs per optimizer step (MonotoneCostPoints order); empty: the line alone.
  std::vector<CostPoint> measured = {};
};

// Cost of giving `batch` samples to `worker`; nondecreasing in batch, which is what makes the
// greedy refinement exact.
double SplitCost(const SplitWorker& worker, int batch);

// Largest cost over the workers for the given batches (the bottleneck the split minimises).
double BottleneckCost(std::span<const SplitWorker> workers, std::span<const int> batches);

// Continuous water level T with sum_i clip((T - fixed_i)/per_sample_i, lo_i, hi_i) = total.
// Requires sum lo <= total <= sum hi and at least one worker.
double ContinuousWaterLevel(std::span<const SplitWorker> workers, int total);

// The exact integer optimum. Errors: kInfeasible when sum lo > total or sum hi < total.
// Inputs are trusted (the planner validates them); O(N log N) plus O(excess · log N).
Result<std::vector<int>> MinMaxSplit(std::span<const SplitWorker> workers, int total);

}  // namespace fulcrum::balancer
