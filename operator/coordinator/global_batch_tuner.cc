#include "operator/coordinator/global_batch_tuner.h"

#include <cmath>

namespace fulcrum::coordinator {
namespace {

// A decision scans tens of candidate global batches, each a full split: once every this many
// steps is enough next to a dwell of ~100 steps, and keeps a large job's coordinator light.
// A batch outside the job's bounds is still brought inside at the next step.
constexpr int64_t kDecideEverySteps = 10;

balancer::AdaptiveBatchOptions PolicyOptions(const JobSessionConfig::AdaptiveBatching& batching,
                                             int base_batch) {
  return {.min_batch = batching.min_batch,
          .max_batch = batching.max_batch,
          .base_batch = base_batch,
          .min_steps_between_changes = batching.min_steps_between_changes,
          .max_factor = batching.max_factor,
          .min_gain = batching.min_gain};
}

}  // namespace

GlobalBatchTuner::GlobalBatchTuner(const JobSessionConfig& config)
    : batching_(config.batching),
      base_batch_(config.global_batch),
      base_learning_rate_(config.learning_rate),
      global_batch_(config.global_batch),
      learning_rate_(config.learning_rate),
      noise_(config.batching.noise_half_life_steps) {}

void GlobalBatchTuner::Reconfigure(const JobSessionConfig& config, int64_t completed_step) {
  batching_ = config.batching;
  if (config.global_batch != base_batch_ || config.learning_rate != base_learning_rate_) {
    base_batch_ = config.global_batch;
    base_learning_rate_ = config.learning_rate;
    global_batch_ = config.global_batch;
    learning_rate_ = config.learning_rate;
    sample_efficiency_ = 1.0;
    changed_at_step_ = std::max<int64_t>(completed_step, 0);
  }
}

void GlobalBatchTuner::Report(int64_t step, int local_batch, double local_squared_norm,
                              double global_squared_norm) {
  StepStatistics& statistics = by_step_[step];
  // 0 is "not measured" (older trainers, a rank with no samples): not a zero gradient.
  if (local_batch > 0 && local_squared_norm > 0.0) {
    statistics.ranks.push_back({local_batch, local_squared_norm});
  }
  if (global_squared_norm > 0.0) statistics.global_squared_norm = global_squared_norm;
}

std::optional<GlobalBatchChange> GlobalBatchTuner::OnStepComplete(
    int64_t step, int samples, int64_t applies_at_step,
    const balancer::SplitStepSeconds& step_seconds) {
  const auto found = by_step_.find(step);
  if (found != by_step_.end()) {
    const StepStatistics& statistics = found->second;
    if (!statistics.ranks.empty() || statistics.global_squared_norm > 0.0) {
      noise_.ObserveStep(statistics.ranks, {statistics.global_squared_norm > 0.0 ? samples : 0,
                                            statistics.global_squared_norm});
    }
  }
  by_step_.erase(by_step_.begin(), by_step_.upper_bound(step));
  if (!batching_.enabled || base_learning_rate_ <= 0.0) return std::nullopt;
  const bool outside = global_batch_ < batching_.min_batch || global_batch_ > batching_.max_batch;
  if (!outside && step % kDecideEverySteps != 0) return std::nullopt;
  const std::optional<balancer::GradientNoiseEstimate> estimate = noise_.Estimate();
  if (!estimate) return std::nullopt;
  const balancer::BatchDecision decision = balancer::DecideGlobalBatch(
      PolicyOptions(batching_, base_batch_), global_batch_,
      std::max<int64_t>(step - changed_at_step_, 0), estimate->noise_scale, step_seconds);
  if (!decision.changed) return std::nullopt;
  GlobalBatchChange change{.step = step,
                           .from = global_batch_,
                           .to = decision.batch,
                           .learning_rate = balancer::ScaledLearningRate(
                               batching_.scaling, base_learning_rate_, base_batch_, decision.batch,
                               estimate->noise_scale),
                           .noise_scale = estimate->noise_scale,
                           .sample_efficiency = balancer::StatisticalEfficiency(
                               estimate->noise_scale, base_batch_, decision.batch),
                           .reason = decision.reason};
  global_batch_ = change.to;
  learning_rate_ = change.learning_rate;
  sample_efficiency_ = change.sample_efficiency;
  changed_at_step_ = std::max(step, applies_at_step);
  changes_.push_back(change);
  while (changes_.size() > kKeptChanges) changes_.pop_front();
  return change;
}

void GlobalBatchTuner::ForgetIncompleteSteps() {
  by_step_.clear();
}

}  // namespace fulcrum::coordinator
