#include "operator/cmd/fulcrum_plan/plan_output.h"

#include <string>

namespace fulcrum::plan_cli {

nlohmann::ordered_json PlanToJson(const balancer::Plan& plan) {
  nlohmann::ordered_json batches = nlohmann::ordered_json::object();
  nlohmann::ordered_json micro_batches = nlohmann::ordered_json::object();
  nlohmann::ordered_json compute_seconds = nlohmann::ordered_json::object();
  for (const balancer::WorkerAssignment& worker : plan.workers) {
    batches[worker.id] = worker.batch;
    micro_batches[worker.id] = worker.micro_batch;
    compute_seconds[worker.id] = worker.compute_seconds;
  }
  nlohmann::ordered_json out;
  out["policy"] = std::string(balancer::ToString(plan.policy));
  out["global_batch"] = plan.global_batch;
  out["accumulation_steps"] = plan.accumulation_steps;
  out["batches"] = std::move(batches);
  out["micro_batches"] = std::move(micro_batches);
  out["compute_seconds"] = std::move(compute_seconds);
  out["step_seconds"] = plan.step_seconds;
  out["ideal_step_seconds"] = plan.ideal_step_seconds;
  out["samples_per_second"] = plan.samples_per_second;
  out["ideal_samples_per_second"] = plan.ideal_samples_per_second;
  out["efficiency"] = plan.efficiency;
  out["idle_fraction"] = plan.idle_fraction;
  return out;
}

}  // namespace fulcrum::plan_cli
