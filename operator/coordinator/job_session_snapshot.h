// A read-only picture of one job, for the operator's status and for tools.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::coordinator {

struct MemberSnapshot {
  std::string pod;
  std::string node;
  std::string gpu_product;
  bool connected = false;
  int rank = -1;  // -1: waiting (spare, or joined after the generation formed)
  int local_batch = 0;
  int64_t last_step = -1;
  double compute_seconds = 0.0;  // of the last reported step
  double step_seconds = 0.0;
  double samples_per_second = 0.0;         // local batch / compute seconds of the last step
  double data_wait_seconds = 0.0;          // the last step's wait for its batch
  double data_wait_fraction = 0.0;         // smoothed share of step time spent waiting for data
  double fitted_fixed_seconds = 0.0;       // the balancer's a_i
  double fitted_seconds_per_sample = 0.0;  // the balancer's k_i
  // The best split would give this worker nothing: its GPU cannot make the job faster (its
  // fixed cost alone is longer than the others' step). The operator releases it.
  bool releasable = false;
};

struct RebalanceSnapshot {
  int64_t apply_at_step = -1;  // -1: no rebalance yet
  std::string reason;
  double unix_seconds = 0.0;
  std::vector<int> batches;     // by rank
  double predicted_gain = 0.0;  // fraction of step time saved, for speed rebalances
  // The plan's step time as the balancer predicted it, and as measured once it ran (wall time
  // per step over its first steps, up to 10, on one clock; 0 until 3 ran). Their ratio is the
  // plan's calibration: the model's calibration (T_model(current) / T_measured) only says the model
  // reproduces the split it was fitted on, this says whether it predicted a split it had not
  // run. Workers whose costs depend on each other (processes sharing one GPU under MPS share its
  // memory bandwidth) fit their own splits well and predict others badly.
  double predicted_step_seconds = 0.0;
  double measured_step_seconds = 0.0;
  int measured_steps = 0;    // how many steps that is over
  double calibration = 0.0;  // predicted ÷ measured; 0 until measured
};

// The job's last evaluation (rank 0's Evaluation message); step -1: none yet.
struct EvaluationSnapshot {
  int64_t step = -1;
  double loss = 0.0;               // mean over the evaluation set
  std::optional<double> accuracy;  // top-1, where the label is a class
  int64_t samples = 0;
  double seconds = 0.0;       // how long it took
  double unix_seconds = 0.0;  // when the coordinator heard of it
};

// A change of the adaptive global batch (global_batch_tuner.h).
struct GlobalBatchChange {
  int64_t step = 0;  // the completed step the decision was taken after
  int from = 0;
  int to = 0;
  double learning_rate = 0.0;  // with the new batch (0: the trainers' own)
  double noise_scale = 0.0;
  double sample_efficiency = 1.0;  // of a sample at `to` against one at B0, from noise_scale
  std::string reason;
};

struct JobSessionSnapshot {
  std::string name;
  std::string policy;
  int global_batch = 0;
  int64_t membership_generation = 0;  // the trainers' generation, not metadata.generation
  // Why this session formed its last generation ("joined: w-2", "left: w-1"; "" before one
  // formed), and the step its plan applies from.
  std::string generation_reason;
  int64_t generation_step = -1;
  int64_t step = -1;  // last step every member reported
  std::vector<MemberSnapshot> members;
  std::vector<int> plan;  // current batches by rank
  // Committed samples over the wall time between rank 0's step end times (one clock), over
  // recent steps; B / median step time for trainers that do not send end times.
  double measured_samples_per_second = 0.0;
  // The best split's rate under the balancer's step-time model rescaled to the measured
  // period: measured ÷ efficiency.
  double ideal_samples_per_second = 0.0;
  double efficiency = 0.0;  // η = T(best) / T(current) under one model, <= 1 by construction
  // How well that model reproduces the measured period: T_model(current) / T_measured (1:
  // exact). Poor calibration, not an efficiency above 1, is how a wrong model shows.
  double model_calibration = 0.0;
  int plan_changes = 0;
  RebalanceSnapshot last_rebalance;
  // Step time saved by going on without the releasable members (0: none is releasable).
  double release_gain = 0.0;
  // Why the last attempt to form a generation failed ("" when the last one formed), and how
  // many attempts in a row failed; the session keeps retrying with back-off.
  std::string formation_error;
  int formation_failures = 0;
  EvaluationSnapshot last_evaluation;
  double training_loss = std::numeric_limits<double>::quiet_NaN();  // last step, global mean
  // spec.batching: "fixed" or "adaptive"; the learning rate the trainers were given with the
  // global batch above (0: their own); the gradient noise scale B_noise (0: not estimated
  // yet), estimated in either mode; the adaptive global batch's recent changes, newest last.
  std::string batching_mode = "fixed";
  double learning_rate = 0.0;
  double gradient_noise_scale = 0.0;
  std::vector<GlobalBatchChange> global_batch_changes;
};

nlohmann::json ToJson(const JobSessionSnapshot& job);

}  // namespace fulcrum::coordinator
