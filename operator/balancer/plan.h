// What the planner takes and what it returns. Plain data; see planner.h for the function.
#pragma once

#include <string>
#include <vector>

#include "operator/balancer/cost_curve.h"
#include "operator/balancer/policy_kind.h"

namespace fulcrum::balancer {

// One worker as the planner sees it: its fitted compute time c(b) = a + k·b, what was measured
// where the line is wrong, and its limits.
struct WorkerSpec {
  std::string id;
  double fixed_seconds = 0.0;       // a: per-step cost that does not depend on the batch
  double seconds_per_sample = 0.0;  // k: cost of one more sample
  int min_batch = 1;                // L: 0 lets the planner leave a worker that cannot help idle
  int max_batch = 0;                // M: largest micro-batch that fits in memory
  int current_batch = 0;            // local batch of the running plan, 0 if none
  // Measured compute times per micro-batch where they contradict the line (cost_curve.h);
  // empty: the line alone.
  std::vector<CostPoint> measured = {};
};

struct PlanRequest {
  int global_batch = 0;  // B: samples per optimizer step, kept exact by every policy
  std::vector<WorkerSpec> workers;
  double tail_seconds = 0.0;       // all-reduce time not hidden behind the backward pass
  bool allow_accumulation = true;  // split B into micro-steps when sum M_i < B
};

struct WorkerAssignment {
  std::string id;
  int batch = 0;                 // samples per optimizer step; the batches sum to B
  int micro_batch = 0;           // largest micro-batch, ceil(batch / accumulation_steps) <= M
  double compute_seconds = 0.0;  // predicted c_i for this batch
};

struct Plan {
  PolicyKind policy = PolicyKind::kOptimal;
  std::vector<WorkerAssignment> workers;  // in request order
  int global_batch = 0;
  int accumulation_steps = 1;
  double step_seconds = 0.0;              // predicted: max_i c_i + tail
  double ideal_step_seconds = 0.0;        // best any split could reach for B
  double samples_per_second = 0.0;        // predicted: B / step_seconds
  double ideal_samples_per_second = 0.0;  // X_UB
  double efficiency = 0.0;                // predicted η = samples_per_second / X_UB
  double idle_fraction = 0.0;             // predicted straggler idle fraction
  std::string reason;                     // why this plan exists (filled by the controller)
  // Fraction of the step time the switch to this plan was predicted to save (filled by the
  // controller when it replaces a plan for speed; 0 for plans forced by membership or edits).
  double predicted_gain = 0.0;
};

}  // namespace fulcrum::balancer
