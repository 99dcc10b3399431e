#include "operator/balancer/equal_policy.h"

namespace fulcrum::balancer {

Result<std::vector<int>> EqualPolicy::Split(const SplitProblem& problem) const {
  // Equal shares are the min-max split when every sample costs the same everywhere.
  std::vector<SplitWorker> uniform(problem.workers.begin(), problem.workers.end());
  for (SplitWorker& worker : uniform) {
    worker.fixed_seconds = 0.0;
    worker.seconds_per_sample = 1.0;
    worker.measured.clear();
  }
  return MinMaxSplit(uniform, problem.total);
}

}  // namespace fulcrum::balancer
