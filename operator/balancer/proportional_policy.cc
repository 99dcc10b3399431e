#include "operator/balancer/proportional_policy.h"

#include <algorithm>

namespace fulcrum::balancer {

Result<std::vector<int>> ProportionalPolicy::Split(const SplitProblem& problem) const {
  // Throughput is measured where the worker runs now; before any plan, at the equal share.
  const int equal_share = std::max(
      1, problem.total / static_cast<int>(std::max<std::size_t>(1, problem.workers.size())));
  std::vector<SplitWorker> by_throughput(problem.workers.begin(), problem.workers.end());
  for (std::size_t i = 0; i < by_throughput.size(); ++i) {
    const int current = i < problem.current_batches.size() ? problem.current_batches[i] : 0;
    const int reference = current > 0 ? current : equal_share;
    const double samples_per_second = reference / SplitCost(problem.workers[i], reference);
    // A split proportional to weights w_i is the min-max split of costs b_i / w_i, rounded
    // by the same exact integer refinement, with the same bounds.
    by_throughput[i].fixed_seconds = 0.0;
    by_throughput[i].seconds_per_sample = 1.0 / samples_per_second;
    by_throughput[i].measured.clear();
  }
  return MinMaxSplit(by_throughput, problem.total);
}

}  // namespace fulcrum::balancer
