// The planner: validates a request, decides gradient accumulation, asks a policy for the split
// and predicts the plan's step time, X_UB and efficiency.
#pragma once

#include <span>
#include <vector>

#include "common/result.h"
#include "operator/balancer/min_max_split.h"
#include "operator/balancer/plan.h"
#include "operator/balancer/policy.h"

namespace fulcrum::balancer {

// Micro-steps per optimizer step: 1 when the workers' memory holds B at once, otherwise the
// fewest s with s · sum M_i >= B. More would only add fixed costs s·a_i.
int RequiredAccumulationSteps(const PlanRequest& request);

// The split solver's view of the request for s micro-steps: a worker pays a_i once per
// micro-step and may take up to s·M_i samples per optimizer step.
std::vector<SplitWorker> SplitWorkersFor(const PlanRequest& request, int accumulation_steps);

// Predicted step time of `batches` (request order): max_i c_i(b_i) + tail.
double PredictStepSeconds(const PlanRequest& request, std::span<const int> batches,
                          int accumulation_steps);

// The plan `policy` makes for `request`; errors come from ValidatePlanRequest.
Result<Plan> MakePlan(const PlanRequest& request, const Policy& policy);

}  // namespace fulcrum::balancer
