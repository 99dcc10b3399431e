#include "operator/balancer/optimal_policy.h"

namespace fulcrum::balancer {

Result<std::vector<int>> OptimalPolicy::Split(const SplitProblem& problem) const {
  return MinMaxSplit(problem.workers, problem.total);
}

}  // namespace fulcrum::balancer
