// Input checks for a PlanRequest. Every error names the offending field and says how to fix
// it, e.g. "workers[2].seconds_per_sample: must be a finite number > 0".
#pragma once

#include "common/result.h"
#include "operator/balancer/plan.h"

namespace fulcrum::balancer {

// kInvalidArgument for malformed values, kInfeasible when the values are fine but no split
// can satisfy them (minimums above B, or maximums below B with accumulation disabled).
Status ValidatePlanRequest(const PlanRequest& request);

}  // namespace fulcrum::balancer
