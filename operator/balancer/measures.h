// Measures of quality (DESIGN.md "Measures of quality"). Pure arithmetic, shared by the
// planner (predicted values), the simulator (measured values) and the benchmarks.
#pragma once

#include <span>

namespace fulcrum::balancer {

// B / step time; 0 for a non-positive step time.
double SamplesPerSecond(int global_batch, double step_seconds);

// Balance efficiency η = samples/s ÷ X_UB, X_UB being the best any split of B could reach.
double BalanceEfficiency(double samples_per_second, double ideal_samples_per_second);

// Straggler idle fraction 1 − Σ c_i / (N · max c_i): the share of GPU time spent waiting for
// the slowest worker in one step. 0 for no workers or when nobody computes.
double IdleFraction(std::span<const double> compute_seconds);

}  // namespace fulcrum::balancer
