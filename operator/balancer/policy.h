// A policy splits one optimizer step's samples among the workers. Each policy is a small
// class in its own file; the planner (planner.h) owns validation, accumulation and measures,
// so a policy only answers "how many samples does each worker get".
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "common/result.h"
#include "operator/balancer/min_max_split.h"
#include "operator/balancer/policy_kind.h"

namespace fulcrum::balancer {

// One step's split problem. `workers` carry the fitted costs for this accumulation setting
// (fixed cost already paid once per micro-step) and the per-step bounds.
struct SplitProblem {
  std::span<const SplitWorker> workers;
  std::span<const int> current_batches;  // per worker, 0 when there is no running plan
  int total = 0;
};

class Policy {
 public:
  virtual ~Policy() = default;
  virtual PolicyKind kind() const = 0;
  // Batches per worker, summing exactly to problem.total and within [lo, hi];
  // kInfeasible when the bounds do not allow that.
  virtual Result<std::vector<int>> Split(const SplitProblem& problem) const = 0;
};

std::unique_ptr<Policy> MakePolicy(PolicyKind kind);

}  // namespace fulcrum::balancer
