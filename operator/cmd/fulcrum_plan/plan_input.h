// Reads fulcrum-plan's input document:
//   {"global_batch": B, "policy": "optimal|proportional|equal",
//    "workers": [{"id": "w0", "a": 0.03, "k": 0.0007, "min": 1, "max": 256, "current": 0}],
//    "tail_seconds": 0.02, "allow_accumulation": true}
// "a" and "k" are required; "min" defaults to 1, "max" to global_batch, "current" to 0,
// "policy" to optimal. Errors name the JSON field, e.g. "workers[2].k: must be a finite
// number > 0".
#pragma once

#include <string_view>

#include "operator/balancer/plan.h"
#include "operator/balancer/policy_kind.h"
#include "common/result.h"

namespace fulcrum::plan_cli {

struct PlanInput {
  balancer::PlanRequest request;
  balancer::PolicyKind policy = balancer::PolicyKind::kOptimal;
};

// Parses and validates (ValidatePlanRequest included): a returned input always plans.
Result<PlanInput> ParsePlanInput(std::string_view json_text);

}  // namespace fulcrum::plan_cli
