// The names of the batch allocation policies, shared by plans, configs and the CLI.
#pragma once

#include <string_view>

#include "common/result.h"

namespace fulcrum::balancer {

enum class PolicyKind {
  kOptimal,       // min-max water-filling: every worker finishes computing at the same time
  kProportional,  // share proportional to measured throughput (OmniLearn, Vineeth S.)
  kEqual,         // the same local batch everywhere (PyTorch DDP)
};

std::string_view ToString(PolicyKind kind);

// Accepts "optimal", "proportional" or "equal"; `field` names the input in the error.
Result<PolicyKind> ParsePolicyKind(std::string_view text, std::string_view field = "policy");

}  // namespace fulcrum::balancer
