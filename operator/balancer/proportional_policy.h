// `proportional`: each worker's share is proportional to its throughput measured at the batch
// it runs now (OmniLearn's b_i' = b_i·t̄/t_i, Vineeth S.'s p_i ∝ p_i/t_i). Applied repeatedly
// it drifts toward the optimum; applied once it ignores the fixed cost a_i of the new batch.
#pragma once

#include "operator/balancer/policy.h"

namespace fulcrum::balancer {

class ProportionalPolicy final : public Policy {
 public:
  PolicyKind kind() const override { return PolicyKind::kProportional; }
  Result<std::vector<int>> Split(const SplitProblem& problem) const override;
};

}  // namespace fulcrum::balancer
