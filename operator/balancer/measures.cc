#include "operator/balancer/measures.h"

#include <algorithm>
#include <numeric>

namespace fulcrum::balancer {

double SamplesPerSecond(int global_batch, double step_seconds) {
  return step_seconds > 0.0 ? global_batch / step_seconds : 0.0;
}

double BalanceEfficiency(double samples_per_second, double ideal_samples_per_second) {
  return ideal_samples_per_second > 0.0 ? samples_per_second / ideal_samples_per_second : 0.0;
}

double IdleFraction(std::span<const double> compute_seconds) {
  if (compute_seconds.empty()) return 0.0;
  const double slowest = *std::max_element(compute_seconds.begin(), compute_seconds.end());
  if (slowest <= 0.0) return 0.0;
  const double busy = std::accumulate(compute_seconds.begin(), compute_seconds.end(), 0.0);
  return 1.0 - busy / (static_cast<double>(compute_seconds.size()) * slowest);
}

}  // namespace fulcrum::balancer
