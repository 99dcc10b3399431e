// Writes a plan as fulcrum-plan's JSON output: per-worker maps keyed by worker id, then the
// predicted measures.
#pragma once

#include <nlohmann/json.hpp>

#include "operator/balancer/plan.h"

namespace fulcrum::plan_cli {

nlohmann::ordered_json PlanToJson(const balancer::Plan& plan);

}  // namespace fulcrum::plan_cli
