// One job's global batch and learning rate under spec.batching (docs/adaptive-batch.md): the
// trainers' gradient statistics feed the gradient noise model step by step, and in adaptive
// mode the goodput policy (balancer/adaptive_batch.h) moves the global batch within the job's
// bounds, the learning rate following by the job's scaling rule. In fixed mode B is the job's
// and only the noise scale is estimated (status shows it: whether a larger batch would pay).
// Pure, like the JobSession that owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "operator/balancer/adaptive_batch.h"
#include "operator/balancer/gradient_noise.h"
#include "operator/coordinator/job_session_config.h"
#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::coordinator {

class GlobalBatchTuner {
 public:
  // Changes kept for status, newest last.
  static constexpr std::size_t kKeptChanges = 20;

  explicit GlobalBatchTuner(const JobSessionConfig& config);

  // A live edit: a new globalBatchSize is the new B0 and the running B, with its learning rate;
  // new bounds or rules apply from the next decision (a B outside new bounds moves at once).
  void Reconfigure(const JobSessionConfig& config, int64_t completed_step);
  // One rank's gradient statistics for `step` (StepReport fields; 0: not measured).
  void Report(int64_t step, int local_batch, double local_squared_norm, double global_squared_norm);
  // Every rank reported `step`, `samples` in all: the step's statistics go to the noise model
  // and, in adaptive mode, a new global batch may be chosen (returned; nullopt: unchanged), to
  // come into force at `applies_at_step` (the plan lead). The dwell counts from there: a change
  // is never decided before the last one ran.
  std::optional<GlobalBatchChange> OnStepComplete(int64_t step, int samples,
                                                  int64_t applies_at_step,
                                                  const balancer::SplitStepSeconds& step_seconds);
  // A new membership generation: statistics of steps that will not complete are dropped.
  void ForgetIncompleteSteps();

  bool adaptive() const { return batching_.enabled; }
  int global_batch() const { return global_batch_; }
  // The learning rate for the trainers' Assignments: the job's, scaled with B in adaptive mode
  // (0: the trainers' own flags, in fixed mode without a job rate).
  double learning_rate() const { return learning_rate_; }
  // What a sample at the running B is worth against one at B0 (Pollux's statistical efficiency
  // from the noise scale when B was chosen; 1 at B0 and in fixed mode): the trainers count an
  // epoch job's length in these (Assignment.sample_efficiency).
  double sample_efficiency() const { return sample_efficiency_; }
  std::optional<balancer::GradientNoiseEstimate> Estimate() const { return noise_.Estimate(); }
  const std::deque<GlobalBatchChange>& changes() const { return changes_; }

 private:
  struct StepStatistics {
    std::vector<balancer::GradientObservation> ranks;
    double global_squared_norm = 0.0;
  };

  JobSessionConfig::AdaptiveBatching batching_;
  int base_batch_;
  double base_learning_rate_;
  int global_batch_;
  double learning_rate_;
  double sample_efficiency_ = 1.0;
  int64_t changed_at_step_ = 0;
  balancer::GradientNoiseModel noise_;
  std::map<int64_t, StepStatistics> by_step_;
  std::deque<GlobalBatchChange> changes_;
};

}  // namespace fulcrum::coordinator
