#include "operator/balancer/policy.h"

#include "operator/balancer/equal_policy.h"
#include "operator/balancer/optimal_policy.h"
#include "operator/balancer/proportional_policy.h"

namespace fulcrum::balancer {

std::unique_ptr<Policy> MakePolicy(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kProportional:
      return std::make_unique<ProportionalPolicy>();
    case PolicyKind::kEqual:
      return std::make_unique<EqualPolicy>();
    case PolicyKind::kOptimal:
      break;
  }
  return std::make_unique<OptimalPolicy>();
}

}  // namespace fulcrum::balancer
