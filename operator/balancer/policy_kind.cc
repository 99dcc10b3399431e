#include "operator/balancer/policy_kind.h"

#include <array>
#include <string>

namespace fulcrum::balancer {
namespace {

constexpr std::array kAllPolicies = {PolicyKind::kOptimal, PolicyKind::kProportional,
                                     PolicyKind::kEqual};

}  // namespace

std::string_view ToString(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kOptimal:
      return "optimal";
    case PolicyKind::kProportional:
      return "proportional";
    case PolicyKind::kEqual:
      return "equal";
  }
  return "unknown";
}

Result<PolicyKind> ParsePolicyKind(std::string_view text, std::string_view field) {
  for (PolicyKind kind : kAllPolicies) {
    if (text == ToString(kind)) return kind;
  }
  return InvalidArgument(std::string(field), "unknown policy \"" + std::string(text) +
                                                 "\": use optimal, proportional or equal");
}

}  // namespace fulcrum::balancer
