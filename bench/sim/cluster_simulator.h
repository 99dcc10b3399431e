// Step-level simulation of a heterogeneous cluster driven by the real balancer Controller.
// Each step: the controller decides the batches, every worker "computes" with its true cost
// (a·s + k·b, times its slowdown), and reports only what a trainer measures: noisy compute
// time, comm time (waiting for the straggler plus the all-reduce tail) and peak memory.
// The simulator alone knows the truth and uses it for the measures (X_UB, η, idle fraction).
// With noise.jitter > 0 the true compute times themselves vary from step to step; X_UB stays
// the bound from the mean costs, which no split then reaches, so the run also reports the
// oracle's η (the true-optimal split under the same jitter).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/sim/scenario.h"
#include "common/result.h"
#include "operator/balancer/policy_kind.h"

namespace fulcrum::sim {

struct EventOutcome {
  int64_t step = 0;
  std::string description;
  // Steps from the event until the split's η (under the mean costs: what the balancer
  // controls, not one step's jitter or contention draw) is back to >= 0.95 for good (before
  // the next event); nullopt when it never gets there.
  std::optional<int64_t> reaction_steps;
  // Plan changes decided from the event until the next one (the thrash measure: a clean
  // answer to a slowdown is one or two).
  int plan_changes = 0;
  // For a slowdown to a factor above 1: steps at which the slowed worker's batch rose over the
  // step before (a balancer that thrashes gives samples back to it); 0 for other events.
  int slowed_batch_rises = 0;
};

struct PolicyRun {
  balancer::PolicyKind policy = balancer::PolicyKind::kOptimal;
  double samples_per_second = 0.0;        // measured: sum of B / sum of step times
  double ideal_samples_per_second = 0.0;  // X_UB from the true costs, same B, same members
  double efficiency = 0.0;                // η = samples_per_second / X_UB
  // η of the true-optimal split run under the same per-step jitter: what a balancer with
  // perfect knowledge would reach (1.0 without jitter).
  double oracle_efficiency = 0.0;
  double idle_fraction = 0.0;  // mean straggler idle fraction per step
  int plan_changes = 0;        // including the first plan
  int out_of_memory_steps = 0;
  // Steps in which a worker ran a micro-batch more than 10% slower than its profile's
  // min_efficient_batch, a bigger one, and the last such step (-1: none).
  int pathological_steps = 0;
  int64_t last_pathological_step = -1;
  std::vector<EventOutcome> events;  // the start first, then each scenario event
  std::vector<double> efficiency_per_step;
  std::vector<double> split_efficiency_per_step;   // η of the split under the mean costs
  std::vector<bool> plan_changed_per_step;         // whether the decision made at that step did
  std::vector<std::vector<int>> batches_per_step;  // what the workers ran, for --trace
  // The step each plan was decided at and its reason, for --trace.
  std::vector<std::pair<int64_t, std::string>> plan_reasons;
};

// Threshold for "back within 5%" in the reaction measure.
constexpr double kRecoveredEfficiency = 0.95;

Result<PolicyRun> RunScenario(const Scenario& scenario, balancer::PolicyKind policy);

}  // namespace fulcrum::sim
