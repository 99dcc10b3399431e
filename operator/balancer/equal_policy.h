// `equal`: the same local batch on every worker, as PyTorch DDP does; the remainder of B / N
// goes one sample each to the first workers, and bounds are respected by moving the excess.
#pragma once

#include "operator/balancer/policy.h"

namespace fulcrum::balancer {

class EqualPolicy final : public Policy {
 public:
  PolicyKind kind() const override { return PolicyKind::kEqual; }
  Result<std::vector<int>> Split(const SplitProblem& problem) const override;
};

}  // namespace fulcrum::balancer
