#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::coordinator {

nlohmann::json ToJson(const JobSessionSnapshot& job) {
  nlohmann::json members = nlohmann::json::array();
  for (const MemberSnapshot& member : job.members) {
    members.push_back({{"pod", member.pod},
                       {"node", member.node},
                       {"gpu_product", member.gpu_product},
                       {"connected", member.connected},
                       {"rank", member.rank},
                       {"local_batch", member.local_batch},
                       {"last_step", member.last_step},
                       {"compute_seconds", member.compute_seconds},
                       {"step_seconds", member.step_seconds},
                       {"samples_per_second", member.samples_per_second},
                       {"fitted_fixed_seconds", member.fitted_fixed_seconds},
                       {"fitted_seconds_per_sample", member.fitted_seconds_per_sample}});
  }
  nlohmann::json changes = nlohmann::json::array();
  for (const GlobalBatchChange& change : job.global_batch_changes) {
    changes.push_back({{"step", change.step},
                       {"from", change.from},
                       {"to", change.to},
                       {"learning_rate", change.learning_rate},
                       {"noise_scale", change.noise_scale},
                       {"sample_efficiency", change.sample_efficiency},
                       {"reason", change.reason}});
  }
  return {
      {"name", job.name},
      {"policy", job.policy},
      {"global_batch", job.global_batch},
      {"membership_generation", job.membership_generation},
      {"generation_reason", job.generation_reason},
      {"generation_step", job.generation_step},
      {"step", job.step},
      {"members", members},
      {"plan", job.plan},
      {"measured_samples_per_second", job.measured_samples_per_second},
      {"ideal_samples_per_second", job.ideal_samples_per_second},
      {"efficiency", job.efficiency},
      {"model_calibration", job.model_calibration},
      {"plan_changes", job.plan_changes},
      {"formation_error", job.formation_error},
      {"formation_failures", job.formation_failures},
      {"training_loss", job.training_loss},
      {"batching_mode", job.batching_mode},
      {"learning_rate", job.learning_rate},
      {"gradient_noise_scale", job.gradient_noise_scale},
      {"global_batch_changes", changes},
      {"last_evaluation",
       {{"step", job.last_evaluation.step},
        {"loss", job.last_evaluation.loss},
        {"accuracy", job.last_evaluation.accuracy ? nlohmann::json(*job.last_evaluation.accuracy)
                                                  : nlohmann::json(nullptr)},
        {"samples", job.last_evaluation.samples},
        {"seconds", job.last_evaluation.seconds}}},
      {"last_rebalance",
       {{"apply_at_step", job.last_rebalance.apply_at_step},
        {"reason", job.last_rebalance.reason},
        {"unix_seconds", job.last_rebalance.unix_seconds},
        {"batches", job.last_rebalance.batches},
        {"predicted_gain", job.last_rebalance.predicted_gain},
        {"predicted_step_seconds", job.last_rebalance.predicted_step_seconds},
        {"measured_step_seconds", job.last_rebalance.measured_step_seconds},
        {"measured_steps", job.last_rebalance.measured_steps},
        {"calibration", job.last_rebalance.calibration}}}};
}

}  // namespace fulcrum::coordinator
