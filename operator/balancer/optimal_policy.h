// `optimal`: minimise the slowest worker's compute time, max_i (a_i + k_i·b_i), exactly over
// integers (water-filling, then one-by-one refinement; see min_max_split.h).
#pragma once

#include "operator/balancer/policy.h"

namespace fulcrum::balancer {

class OptimalPolicy final : public Policy {
 public:
  PolicyKind kind() const override { return PolicyKind::kOptimal; }
  Result<std::vector<int>> Split(const SplitProblem& problem) const override;
};

}  // namespace fulcrum::balancer
