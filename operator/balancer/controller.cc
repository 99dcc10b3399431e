#include "operator/balancer/controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "operator/balancer/dither.h"
#include "operator/balancer/gpu_catalog.h"
#include "operator/balancer/planner.h"

namespace fulcrum::balancer {
namespace {

// Before anything is measured, costs are only relative: 1 ms per sample at V100 speed.
constexpr double kUnmeasuredSecondsPerSample = 1e-3;

double Median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

std::string Join(const std::vector<std::string>& items) {
  std::string joined;
  for (const std::string& item : items) joined += (joined.empty() ? "" : ", ") + item;
  return joined;
}

Status ValidateConfig(const ControllerConfig& config) {
  if (config.global_batch < 1) return InvalidArgument("global_batch", "must be an integer >= 1");
  if (config.interval_steps < 1) {
    return InvalidArgument("interval_steps", "must be an integer >= 1");
  }
  if (!std::isfinite(config.min_gain) || config.min_gain < 0.0 || config.min_gain >= 1.0) {
    return InvalidArgument("min_gain", "must be a number in [0, 1), e.g. 0.05 for 5%");
  }
  if (!(config.memory_headroom > 0.0 && config.memory_headroom <= 1.0)) {
    return InvalidArgument("memory_headroom", "must be a number in (0, 1], e.g. 0.9");
  }
  if (!(config.dither_fraction >= 0.0 && config.dither_fraction <= 0.5)) {
    return InvalidArgument("dither_fraction", "must be a number in [0, 0.5]");
  }
  if (!(config.refinement_error_ratio >= 0.0 && config.refinement_error_ratio < 1.0)) {
    return InvalidArgument("refinement_error_ratio", "must be a number in [0, 1), e.g. 0.5");
  }
  if (!(config.refinement_min_gain >= 0.0 && config.refinement_min_gain < 1.0)) {
    return InvalidArgument("refinement_min_gain", "must be a number in [0, 1), e.g. 0.005");
  }
  if (config.dither_period_steps < 1) {
    return InvalidArgument("dither_period_steps", "must be an integer >= 1");
  }
  if (config.dither_budget_steps < 0) {
    return InvalidArgument("dither_budget_steps", "must be an integer >= 0");
  }
  return Ok();
}

Status ValidateReport(const StepReport& report) {
  if (report.step < 0) return InvalidArgument("step", "must be >= 0");
  if (report.local_batch < 0) return InvalidArgument("local_batch", "must be >= 0");
  if (report.accumulation_steps < 1) {
    return InvalidArgument("accumulation_steps", "must be >= 1");
  }
  if (!std::isfinite(report.compute_seconds) || report.compute_seconds < 0.0) {
    return InvalidArgument("compute_seconds", "must be a finite number >= 0");
  }
  if (!std::isfinite(report.comm_seconds) || report.comm_seconds < 0.0) {
    return InvalidArgument("comm_seconds", "must be a finite number >= 0");
  }
  if (report.peak_memory_bytes < 0) return InvalidArgument("peak_memory_bytes", "must be >= 0");
  return Ok();
}

}  // namespace

Result<Controller> Controller::Create(ControllerConfig config) {
  if (Status status = ValidateConfig(config); !status.ok()) return status.error();
  return Controller(std::move(config));
}

Status Controller::Retune(int global_batch, PolicyKind policy, double min_gain,
                          int interval_steps) {
  ControllerConfig config = config_;
  config.global_batch = global_batch;
  config.policy = policy;
  config.min_gain = min_gain;
  config.interval_steps = interval_steps;
  if (Status status = ValidateConfig(config); !status.ok()) return status;
  if (global_batch != config_.global_batch) {
    retuned_.push_back("global batch " + std::to_string(config_.global_batch) + " -> " +
                       std::to_string(global_batch));
  }
  if (policy != config_.policy) {
    retuned_.push_back("policy " + std::string(ToString(config_.policy)) + " -> " +
                       std::string(ToString(policy)));
    policy_ = MakePolicy(policy);
  }
  config_ = std::move(config);
  return Ok();
}

Controller::Controller(ControllerConfig config)
    : config_(std::move(config)), policy_(MakePolicy(config_.policy)) {}

Controller::Worker* Controller::Find(std::string_view id) {
  const auto it = index_of_.find(std::string(id));
  return it == index_of_.end() ? nullptr : &workers_[it->second];
}

void Controller::Reindex() {
  index_of_.clear();
  for (std::size_t i = 0; i < workers_.size(); ++i) index_of_.emplace(workers_[i].info.id, i);
}

const Controller::Worker* Controller::Find(std::string_view id) const {
  return const_cast<Controller*>(this)->Find(id);
}

std::optional<LinearCost> Controller::FittedCost(std::string_view id) const {
  const Worker* worker = Find(id);
  if (worker == nullptr) return std::nullopt;
  return worker->compute.estimate();
}

std::optional<LinearCost> Controller::PlanningCost(std::string_view id) const {
  const Worker* worker = Find(id);
  if (worker == nullptr) return std::nullopt;
  return worker->planning_cost;
}

// Pools the models of workers that report the same GPU product (product_pool.h): members whose
// own data cannot tell a from k take the pool's shape, and each worker plans with its pooled
// cost. Workers without a product label, or alone with theirs, plan with their own fit.
void Controller::PoolByProduct() {
  std::map<std::string_view, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker& worker = workers_[i];
    worker.planning_cost = worker.compute.estimate();
    if (!worker.info.gpu_product.empty()) groups[worker.info.gpu_product].push_back(i);
  }
  for (const auto& [product, indices] : groups) {
    if (indices.size() < 2) continue;
    std::vector<const ComputeTimeModel*> models;
    for (std::size_t i : indices) models.push_back(&workers_[i].compute);
    PooledEstimate pooled = PoolSameProduct(models, config_.pool, config_.fitter);
    if (pooled.shape) {
      // The shape changes the members' own fits, so pool again for their costs.
      for (std::size_t j = 0; j < indices.size(); ++j) {
        if (pooled.on_its_own[j]) continue;
        workers_[indices[j]].compute.AdoptShape(*pooled.shape, pooled.shape_slope_error);
      }
      pooled = PoolSameProduct(models, config_.pool, config_.fitter);
    }
    for (std::size_t j = 0; j < indices.size(); ++j) {
      workers_[indices[j]].planning_cost = pooled.costs[j];
    }
  }
}

// A newcomer's prior: what the measured workers cost per unit of catalog speed, divided by
// its own speed. The first plan after a join is then already close, not a guess.
LinearCost Controller::PriorFor(double relative_speed) const {
  std::vector<double> fixed;
  std::vector<double> per_sample;
  for (const Worker& worker : workers_) {
    if (worker.compute.observations() == 0) continue;
    fixed.push_back(worker.compute.estimate().fixed_seconds * worker.relative_speed);
    per_sample.push_back(worker.compute.estimate().seconds_per_sample * worker.relative_speed);
  }
  if (fixed.empty()) return {0.0, kUnmeasuredSecondsPerSample / relative_speed};
  return {Median(fixed) / relative_speed, Median(per_sample) / relative_speed};
}

Status Controller::AddWorker(const WorkerInfo& info) {
  if (info.id.empty()) return InvalidArgument("id", "must not be empty");
  if (Find(info.id) != nullptr) {
    return Error{ErrorCode::kAlreadyExists, "worker \"" + info.id + "\" is already a member", "id"};
  }
  if (info.min_batch < 0) return InvalidArgument("min_batch", "must be >= 0");
  if (info.max_batch < 0) return InvalidArgument("max_batch", "must be >= 0 (0 for no cap)");
  if (info.memory_bytes < 0) return InvalidArgument("memory_bytes", "must be >= 0");
  const std::optional<GpuProfile> gpu = LookupGpu(info.gpu_product);
  const double speed = gpu ? gpu->relative_speed : 1.0;
  const int64_t memory = info.memory_bytes > 0 ? info.memory_bytes : (gpu ? gpu->memory_bytes : 0);
  const LinearCost prior = PriorFor(speed);
  workers_.push_back(
      Worker{info, speed, ComputeTimeModel(prior, config_.fitter), MinimumUsefulBatch(),
             MemoryModel(memory, info.max_batch, config_.memory_headroom), 0, prior});
  index_of_.emplace(info.id, workers_.size() - 1);
  std::erase(left_, info.id);
  joined_.push_back(info.id);
  return Ok();
}

Status Controller::RemoveWorker(std::string_view id) {
  const auto it = std::find_if(workers_.begin(), workers_.end(),
                               [&](const Worker& worker) { return worker.info.id == id; });
  if (it == workers_.end()) {
    return Error{ErrorCode::kNotFound, "no worker \"" + std::string(id) + "\"", "id"};
  }
  workers_.erase(it);
  Reindex();
  if (std::erase(joined_, std::string(id)) == 0) left_.emplace_back(id);
  return Ok();
}

Status Controller::Observe(const StepReport& report) {
  Worker* worker = Find(report.worker_id);
  if (worker == nullptr) {
    return Error{ErrorCode::kNotFound,
                 "unknown worker \"" + report.worker_id + "\": add it before it reports",
                 "worker_id"};
  }
  if (Status status = ValidateReport(report); !status.ok()) return status;
  const int micro_batch =
      (report.local_batch + report.accumulation_steps - 1) / report.accumulation_steps;
  if (report.out_of_memory) {
    worker->memory.ObserveOutOfMemory(micro_batch);
    out_of_memory_.push_back(report.worker_id + " at micro-batch " + std::to_string(micro_batch));
    return Ok();
  }
  if (report.local_batch > 0 && report.compute_seconds > 0.0) {
    // The model is per micro-step: s micro-steps of b/s samples cost s·(a + k·b/s).
    const double steps = report.accumulation_steps;
    Result<ObservationOutcome> outcome =
        worker->compute.Observe(report.local_batch / steps, report.compute_seconds / steps);
    if (!outcome.ok()) return outcome.error();
    if (*outcome == ObservationOutcome::kRegimeChange) {
      speed_change_pending_ = true;
      // A new speed makes the old times incomparable. But the line's fitter also sees a
      // "change" when the batch moves into or out of sizes the device runs slower than the
      // line says: only a time that contradicts this size's own history is a new speed.
      if (worker->useful_batch.Contradicts(micro_batch, report.compute_seconds / steps)) {
        worker->useful_batch.Reset();
      }
    }
    // Outliers too: a pathological batch is slow by nature, and the per-size median ignores
    // one-off pauses.
    worker->useful_batch.Observe(micro_batch, report.compute_seconds / steps);
  }
  worker->memory.ObservePeak(micro_batch, report.peak_memory_bytes);
  communication_.Observe(report.step, report.comm_seconds);
  return Ok();
}

std::vector<int> Controller::MinBatches() const {
  // A worker that must train gets at least its minimum useful batch; one allowed to idle
  // (min_batch 0) keeps 0, which the line's fit reaches on its own when it cannot help.
  std::vector<int> learned;
  int64_t total = 0;
  for (const Worker& worker : workers_) {
    const int min_batch = worker.info.min_batch == 0
                              ? 0
                              : std::max(worker.info.min_batch, worker.useful_batch.Minimum());
    learned.push_back(min_batch);
    total += std::min(min_batch, worker.memory.MaxBatch());
  }
  if (total <= config_.global_batch) return learned;
  // The learned minimums do not fit in B together: the users' minimums alone.
  std::vector<int> users;
  for (const Worker& worker : workers_) users.push_back(worker.info.min_batch);
  return users;
}

PlanRequest Controller::BuildRequest() const {
  PlanRequest request;
  request.global_batch = config_.global_batch;
  request.tail_seconds = communication_.TailSeconds();
  request.allow_accumulation = config_.allow_accumulation;
  std::vector<int> current_batches(workers_.size(), 0);
  if (plan_) {
    for (const WorkerAssignment& assignment : plan_->workers) {
      const auto it = index_of_.find(assignment.id);
      if (it != index_of_.end()) current_batches[it->second] = assignment.batch;
    }
  }
  request.workers.reserve(workers_.size());
  const std::vector<int> min_batches = MinBatches();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const Worker& worker = workers_[i];
    const int max_batch = std::min(worker.memory.MaxBatch(), config_.global_batch);
    request.workers.push_back({worker.info.id, worker.planning_cost.fixed_seconds,
                               worker.planning_cost.seconds_per_sample,
                               std::min(min_batches[i], max_batch), max_batch, current_batches[i]});
  }
  return request;
}

std::optional<std::string> Controller::ForcedReason() const {
  if (!plan_) return "first plan";
  std::vector<std::string> reasons;
  if (!joined_.empty()) reasons.push_back("joined: " + Join(joined_));
  if (!left_.empty()) reasons.push_back("left: " + Join(left_));
  if (!out_of_memory_.empty()) reasons.push_back("out of memory: " + Join(out_of_memory_));
  if (!retuned_.empty()) reasons.push_back(Join(retuned_));
  const std::vector<int> min_batches = MinBatches();
  for (const WorkerAssignment& assignment : plan_->workers) {
    const auto index = index_of_.find(assignment.id);
    if (index == index_of_.end()) continue;
    const Worker& worker = workers_[index->second];
    if (assignment.micro_batch > worker.memory.MaxBatch()) {
      reasons.push_back("memory cap of " + assignment.id + " fell below its batch");
    }
    const int min_batch = min_batches[index->second];
    if (assignment.batch > 0 && assignment.batch < std::min(min_batch, worker.memory.MaxBatch())) {
      reasons.push_back("batch " + std::to_string(assignment.batch) + " of " + assignment.id +
                        " is slower than a bigger one (minimum useful batch " +
                        std::to_string(min_batch) + ")");
    }
  }
  if (reasons.empty()) return std::nullopt;
  return Join(reasons);
}

// The least-known worker's relative standard error: a plan is only as good as its worst input.
double Controller::ModelError() const {
  double error = 0.0;
  for (const Worker& worker : workers_) error = std::max(error, worker.compute.LevelError());
  return error;
}

void Controller::Adopt(Plan plan, std::string reason) {
  plan.reason = std::move(reason);
  plan_model_error_ = ModelError();
  plan_ = std::move(plan);
  ++plan_changes_;
  joined_.clear();
  left_.clear();
  out_of_memory_.clear();
  retuned_.clear();
}

std::vector<int> Controller::DitheredBatches(const PlanRequest& request, int64_t step) {
  std::vector<int> batches;
  std::vector<int> min_batches;
  std::vector<int> max_batches;
  std::vector<int> to_dither;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const int batch = plan_->workers[i].batch;
    batches.push_back(batch);
    min_batches.push_back(request.workers[i].min_batch);
    max_batches.push_back(static_cast<int>(std::min<int64_t>(
        int64_t{request.workers[i].max_batch} * plan_->accumulation_steps, config_.global_batch)));
    Worker& worker = workers_[i];
    if (batch > 0 && !worker.compute.identified() &&
        worker.dithered_steps < config_.dither_budget_steps) {
      to_dither.push_back(static_cast<int>(i));
      ++worker.dithered_steps;
    }
  }
  if (to_dither.empty() || config_.dither_fraction <= 0.0) return batches;
  return DitherBatches({batches, min_batches, max_batches, to_dither, step, config_.seed,
                        config_.dither_fraction, config_.dither_period_steps});
}

Result<StepDecision> Controller::Decide(int64_t step) {
  if (workers_.empty()) {
    return MakeError(ErrorCode::kFailedPrecondition, "no workers: add one before planning");
  }
  if (step < last_decided_step_) {
    return InvalidArgument("step", "went back from " + std::to_string(last_decided_step_) + " to " +
                                       std::to_string(step));
  }
  last_decided_step_ = step;
  PoolByProduct();
  const PlanRequest request = BuildRequest();
  StepDecision decision;
  if (std::optional<std::string> reason = ForcedReason()) {
    Result<Plan> plan = MakePlan(request, *policy_);
    if (!plan.ok()) return plan.error();
    Adopt(std::move(*plan), std::move(*reason));
    last_evaluation_step_ = step;
    decision.plan_changed = true;
  } else if (step - last_evaluation_step_ >= config_.interval_steps || speed_change_pending_) {
    last_evaluation_step_ = step;
    speed_change_pending_ = false;
    Result<Plan> candidate = MakePlan(request, *policy_);
    if (!candidate.ok()) return candidate.error();
    std::vector<int> current;
    for (const WorkerAssignment& assignment : plan_->workers) current.push_back(assignment.batch);
    const double current_seconds = PredictStepSeconds(request, current, plan_->accumulation_steps);
    const double gain = 1.0 - candidate->step_seconds / current_seconds;
    const double model_error = ModelError();
    char reason[200];
    if (gain >= config_.min_gain) {
      std::snprintf(reason, sizeof reason,
                    "predicted step time %.4f s -> %.4f s (%.1f%% gain >= %.1f%%)", current_seconds,
                    candidate->step_seconds, 100.0 * gain, 100.0 * config_.min_gain);
    } else if (gain >= config_.refinement_min_gain &&
               model_error <= config_.refinement_error_ratio * plan_model_error_) {
      std::snprintf(reason, sizeof reason,
                    "refinement: model error %.2f%% -> %.2f%%, predicted step time %.4f s -> "
                    "%.4f s (%.1f%% gain)",
                    100.0 * plan_model_error_, 100.0 * model_error, current_seconds,
                    candidate->step_seconds, 100.0 * gain);
    } else {
      reason[0] = '\0';
    }
    if (reason[0] != '\0') {
      candidate->predicted_gain = gain;
      Adopt(std::move(*candidate), reason);
      decision.plan_changed = true;
    }
  }
  decision.accumulation_steps = plan_->accumulation_steps;
  decision.batches = DitheredBatches(request, step);
  return decision;
}

}  // namespace fulcrum::balancer
