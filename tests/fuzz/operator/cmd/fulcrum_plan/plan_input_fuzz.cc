// Fuzzes fulcrum-plan end to end on its input document: ParsePlanInput either refuses the
// JSON with a field-naming error or returns an input that plans ("a returned input always
// plans"), and the plan keeps the balancer's promises: one assignment per worker, in order,
// batches within [min, max x accumulation] that sum exactly to the global batch; then the
// output JSON is written as fulcrum-plan prints it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "operator/balancer/planner.h"
#include "operator/balancer/policy.h"
#include "operator/cmd/fulcrum_plan/plan_input.h"
#include "operator/cmd/fulcrum_plan/plan_output.h"

namespace {

[[noreturn]] void Violated(const std::string& what) {
  std::fprintf(stderr, "plan_input_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  auto input = fulcrum::plan_cli::ParsePlanInput(text);
  if (!input.ok()) {
    (void)input.error().ToString();
    return 0;
  }
  const fulcrum::balancer::PlanRequest& request = input->request;
  auto plan = fulcrum::balancer::MakePlan(request, *fulcrum::balancer::MakePolicy(input->policy));
  if (!plan.ok()) {
    // Infeasible requests (e.g. the batch does not fit) are answers, not failures.
    if (plan.error().code == fulcrum::ErrorCode::kInfeasible) return 0;
    Violated("a validated input did not plan: " + plan.error().ToString());
  }
  if (plan->workers.size() != request.workers.size()) Violated("not one assignment per worker");
  if (plan->accumulation_steps < 1) Violated("accumulation steps < 1");
  int64_t sum = 0;
  for (std::size_t i = 0; i < plan->workers.size(); ++i) {
    const auto& assigned = plan->workers[i];
    const auto& spec = request.workers[i];
    if (assigned.id != spec.id) Violated("assignments out of request order");
    if (assigned.batch < 0) Violated("negative batch for " + spec.id);
    if (assigned.batch > 0 && assigned.batch < spec.min_batch)
      Violated("batch below min for " + spec.id);
    if (assigned.micro_batch > spec.max_batch) Violated("micro-batch above max for " + spec.id);
    sum += assigned.batch;
  }
  if (sum != request.global_batch) {
    Violated("batches sum to " + std::to_string(sum) + ", not the global batch " +
             std::to_string(request.global_batch));
  }
  (void)fulcrum::plan_cli::PlanToJson(*plan).dump(2);
  return 0;
}
