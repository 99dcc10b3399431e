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
// Notes kept until taken (TakeNotes): a caller that never takes them loses the oldest.
constexpr std::size_t kMaxNotes = 64;

std::string Format(const char* format, auto... values) {
  char text[256];
  std::snprintf(text, sizeof text, format, values...);
  return text;
}

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
  if (!(config.gain_noise_sigmas >= 0.0 && std::isfinite(config.gain_noise_sigmas))) {
    return InvalidArgument("gain_noise_sigmas", "must be a number >= 0, e.g. 2");
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

std::optional<WorkerSpec> Controller::PlanningSpec(std::string_view id) const {
  const Worker* worker = Find(id);
  if (worker == nullptr) return std::nullopt;
  int current = 0;
  if (plan_) {
    for (const WorkerAssignment& assignment : plan_->workers) {
      if (assignment.id == id) current = assignment.batch;
    }
  }
  return WorkerSpec{worker->info.id,
                    worker->planning_cost.fixed_seconds,
                    worker->planning_cost.seconds_per_sample,
                    1,
                    config_.global_batch,
                    current,
                    worker->compute.MeasuredCosts(worker->planning_cost)};
}

const ComputeTimeModel* Controller::Model(std::string_view id) const {
  const Worker* worker = Find(id);
  return worker == nullptr ? nullptr : &worker->compute;
}

bool Controller::MeasuredInCurrentRegime(std::string_view id, int micro_batch) const {
  const Worker* worker = Find(id);
  return worker != nullptr &&
         worker->compute.sizes().SettledIn(micro_batch, worker->compute.regime());
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
  workers_.push_back(Worker{info, speed, ComputeTimeModel(prior, config_.fitter),
                            MemoryModel(memory, info.max_batch, config_.memory_headroom), 0, prior,
                            std::nullopt, 1.0, 1.0, false, std::nullopt, 0, std::nullopt});
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
  const std::size_t index = index_of_.at(worker->info.id);
  if (worker->landing_from && plan_ && index < plan_->workers.size() &&
      plan_->workers[index].id == worker->info.id) {
    // The landing of a plan that answered this worker's change of speed: the change may still
    // be under way (the e2e Python job's slowed A100 read x3.4 before the landing, x8 after, as
    // its emulated speed followed the other ranks' batches on shared cores), so the sizes
    // measured before are not compared with those after for the minimum useful batch. They
    // were: 27 after looked slower than 84 before, and a forced plan raised it again.
    const int planned = plan_->workers[index].micro_batch;
    if (std::abs(micro_batch - planned) < std::abs(micro_batch - *worker->landing_from)) {
      worker->compute.RestartSizeComparisons();
      worker->landing_from.reset();
    }
  }
  if (report.local_batch > 0 && report.compute_seconds > 0.0) {
    // The model is per micro-step: s micro-steps of b/s samples cost s·(a + k·b/s).
    const double steps = report.accumulation_steps;
    Result<ObservationOutcome> outcome =
        worker->compute.Observe(report.local_batch / steps, report.compute_seconds / steps);
    if (!outcome.ok()) return outcome.error();
    // Confirmed only at a size measured before in the same regime (performance_model.h), so
    // a batch moving into sizes the device runs differently is not taken for a new speed.
    // A change that ended (a burst of contention long enough to be confirmed and answered) is
    // a change of speed too: answered, the worker gets its samples back. Without this the split
    // it was moved to stayed until the end, 12% slower in a local run of the demo's job, the
    // gain of going back under the noise band.
    if (*outcome == ObservationOutcome::kRegimeChange ||
        *outcome == ObservationOutcome::kChangeEnded) {
      worker->speed_change_unplanned = true;
      Note(
          Format("%s: speed change %s at step %lld, micro-batch %d: speed factor x%.2f (x%.2f when "
                 "the plan was made)",
                 worker->info.id.c_str(),
                 *outcome == ObservationOutcome::kRegimeChange ? "confirmed" : "ended",
                 static_cast<long long>(report.step), micro_batch, worker->compute.speed_factor(),
                 worker->speed_when_planned));
    }
    if (const ComputeTimeModel::RetiredEvidence retired = worker->compute.TakeRetiredEvidence();
        retired.line_refitted || !retired.sizes.empty()) {
      std::vector<std::string> what;
      if (retired.line_refitted) {
        const LinearCost line = worker->compute.estimate();
        what.push_back(Format("line refitted to the sizes measured since (%.4f s + %.5f s/sample)",
                              line.fixed_seconds, line.seconds_per_sample));
      }
      if (!retired.sizes.empty()) {
        std::vector<std::string> sizes;
        for (const int size : retired.sizes) sizes.push_back(std::to_string(size));
        what.push_back("sizes " + Join(sizes) + " no longer count (off the line)");
      }
      Note(Format("%s: evidence older than %d reports retired at step %lld: %s",
                  worker->info.id.c_str(), config_.fitter.stale_after_reports,
                  static_cast<long long>(report.step), Join(what).c_str()));
    }
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
    const int min_batch =
        worker.info.min_batch == 0
            ? 0
            : std::max(worker.info.min_batch, worker.compute.MinimumUsefulBatch());
    learned.push_back(min_batch);
    total += std::min(min_batch, worker.memory.MaxBatch());
  }
  if (total <= config_.global_batch) return learned;
  // The learned minimums do not fit in B together: the users' minimums alone.
  std::vector<int> users;
  for (const Worker& worker : workers_) users.push_back(worker.info.min_batch);
  return users;
}

std::optional<double> Controller::PredictedStepSeconds(int global_batch) const {
  if (!plan_ || global_batch < 1 || workers_.empty()) return std::nullopt;
  PlanRequest request = BuildRequest();
  request.global_batch = global_batch;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    WorkerSpec& worker = request.workers[i];
    worker.max_batch = std::min(workers_[i].memory.MaxBatch(), global_batch);
    worker.min_batch = std::min(worker.min_batch, worker.max_batch);
  }
  Result<Plan> plan = MakePlan(request, *policy_);
  if (!plan.ok()) return std::nullopt;
  return plan->step_seconds;
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
                               std::min(min_batches[i], max_batch), max_batch, current_batches[i],
                               worker.compute.MeasuredCosts(worker.planning_cost)});
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
  for (Worker& worker : workers_) worker.speed_when_planned = worker.compute.speed_factor();
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

void Controller::Note(std::string note) {
  if (notes_.size() >= kMaxNotes) notes_.erase(notes_.begin());
  notes_.push_back(std::move(note));
}

bool Controller::MoveConfirmed(const Worker& worker) const {
  if (!worker.continuation) return false;
  const ComputeTimeModel& model = worker.compute;
  return model.sizes().SettledIn(*worker.continuation, model.regime());
}

bool Controller::HeldAfterShedding(const Worker& worker, int64_t step) const {
  // On shared cores a trainer that slows down (an emulated slowdown sleeps) frees a core: another
  // trainer speeds up until the answer cuts the slowed one's batch, and that speed-up and its end
  // are confirmed changes too. Answering the end once gave the slowed trainer a sample back
  // (trainer_bench, 2026-11-29: 61 -> 43 -> 39 -> 40). Only its own speed-up can.
  const bool sped_up = worker.compute.speed_factor() < worker.speed_when_moved &&
                       SpeedMovedBeyondNoise(worker, worker.speed_when_moved);
  return worker.shed_for_own_slowdown && worker.moved_at_step &&
         step - *worker.moved_at_step < config_.interval_steps && !sped_up;
}

bool Controller::FinishesMove(const Worker& worker) const {
  return MoveConfirmed(worker) && !SpeedChangedSincePlan() &&
         !SpeedMovedBeyondNoise(worker, worker.speed_when_moved);
}

bool Controller::ContinuationReady() const {
  return std::any_of(workers_.begin(), workers_.end(),
                     [&](const Worker& worker) { return MoveConfirmed(worker); });
}

bool Controller::SpeedChangeReady() const {
  // The reports that confirm a change size it roughly; a few more refine the speed factor
  // (performance_model.h) before the plan that follows it, which is then right the first time.
  return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& worker) {
    const bool slowed = worker.compute.speed_factor() > worker.speed_when_planned;
    return worker.speed_change_unplanned &&
           worker.compute.speed_evidence() >=
               (slowed ? config_.slowdown_evidence_to_plan : config_.speed_evidence_to_plan);
  });
}

// Relative distance within which a measured size counts as measuring the target: the dither's
// amplitude, so the sizes a worker ran around its plan count.
constexpr double kMeasuredTolerance = 0.1;
// A worker taking samples into sizes it never ran, beyond this many times its batch, is
// planned on its model within a bound instead of at its current time per sample (DampedPlan).
constexpr int kFarGrowth = 4;

int Controller::FarGrowthBound(const Worker& worker, const WorkerSpec& spec, int current_micro,
                               double step_budget_seconds) const {
  // At least 2·current + 2. Beyond it, as far as the worker's measured time now plus twice its
  // model's slope stays within the plan's step time: from one measured size the fixed cost is
  // known and the slope is the catalog's or its product's guess, so even a slope twice as steep
  // leaves the grower off the critical path, and the worker that shed the samples never has to
  // take them back. Measured from batch 1 only 2·current + 2 let the e2e Python job's V100 take
  // 3 of the slowed A100's 94 samples, a gain under min_gain, so no plan came at all; and each
  // further leg (4, 10, 22, ...) waited for its landing and the dwell.
  constexpr double kSlopeMargin = 2.0;
  const int at_least = 2 * current_micro + 2;
  const double slope = kSlopeMargin * spec.seconds_per_sample;
  const double slack = step_budget_seconds - MeasuredOrModelledSeconds(worker, current_micro);
  if (slope <= 0.0 || slack <= 0.0) return at_least;
  const double reach = current_micro + slack / slope;
  return reach >= spec.max_batch ? spec.max_batch : std::max(at_least, static_cast<int>(reach));
}

std::optional<Plan> Controller::DampedPlan(const PlanRequest& request, int64_t step,
                                           std::string& damping,
                                           std::vector<bool>& unmeasured_moves) const {
  PlanRequest bounded = request;
  const int steps = plan_->accumulation_steps;
  unmeasured_moves.assign(workers_.size(), false);
  std::vector<std::string> held;
  // A move into unmeasured sizes measured where it landed validates the plan that made it: the
  // workers that plan moved to make room may move again with it.
  std::vector<int64_t> confirmed_plans;
  for (const Worker& worker : workers_) {
    if (MoveConfirmed(worker) && worker.moved_at_step) {
      confirmed_plans.push_back(*worker.moved_at_step);
    }
  }
  // A speed change confirmed since the last plan lifts every dwell: the others must take the
  // samples a slowed worker sheds (the global batch is fixed), and holding them made the plan
  // that answers a slowdown wait out the dwell (67 steps after a 6x slowdown in the demo).
  // Only a change beyond timing noise counts: on shared cores a worker's speed factor wobbles
  // by a few percent (and a confirmed "change" at a size just reached can be that wobble), and
  // lifting the dwell for it let a third, noise-sized move follow a slowdown in the demo.
  const bool speed_changed = SpeedChangedSincePlan();
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    const Worker& worker = workers_[i];
    WorkerSpec& spec = bounded.workers[i];
    const int current = spec.current_batch;
    if (current <= 0 || current < spec.min_batch || current > spec.max_batch * steps) continue;
    const bool dwelling = !speed_changed && worker.moved_at_step &&
                          step - *worker.moved_at_step < config_.interval_steps &&
                          !SpeedMovedBeyondNoise(worker, worker.speed_when_moved) &&
                          std::find(confirmed_plans.begin(), confirmed_plans.end(),
                                    *worker.moved_at_step) == confirmed_plans.end();
    // Per optimizer step the bounds are min_batch and max_batch·s; pinning the batch is done
    // in micro-batch units the planner scales back (current is a multiple when s = 1).
    if (dwelling) {
      spec.min_batch = current;
      if (steps == 1) spec.max_batch = current;
      held.push_back(worker.info.id + " moved at step " + std::to_string(*worker.moved_at_step));
    } else if (FinishesMove(worker)) {
      // The move goes on, never back: it stopped short on purpose, so a landing that looks
      // past the optimum is one noisy median (the demo's slowed A100 went 56 -> 18 -> 21).
      if (*worker.continuation < worker.continued_from) {
        if (steps == 1) spec.max_batch = current;
      } else {
        spec.min_batch = current;
      }
    } else if (HeldAfterShedding(worker, step) && steps == 1 && spec.max_batch > current) {
      spec.max_batch = current;
      held.push_back(worker.info.id + " shed samples for its own slowdown at step " +
                     std::to_string(*worker.moved_at_step) + ", takes none back");
    }
  }
  Result<Plan> candidate = MakePlan(bounded, *policy_);
  if (!candidate.ok()) return std::nullopt;
  std::vector<std::string> trust;
  // Each round re-plans the workers the last candidate moved into unmeasured sizes at their
  // current time per sample; a worker is re-planned once, so this ends within one round per
  // worker.
  for (std::size_t round = 0; round <= workers_.size(); ++round) {
    bool tightened = false;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (unmeasured_moves[i]) continue;
      WorkerSpec& spec = bounded.workers[i];
      const int current = spec.current_batch;
      const int target = candidate->workers[i].batch;
      if (current <= 0 || target == current) continue;
      // A worker that sheds samples counts as measured there only on sizes of its current
      // regime: an older regime's time, rescaled by a speed factor, is a guess (a uniform
      // rescale is wrong where the change was in the fixed cost), and on one, a batch-1 time
      // from the Python job's warm-up, its V100 went 33 -> 1 and stayed there, where its one
      // measured time, all fixed cost, left it no room for the A100's samples after a slowdown.
      const int target_micro = (target + steps - 1) / steps;
      const ComputeTimeModel& model = workers_[i].compute;
      if (target_micro > 0 &&
          model.sizes().MeasuredNear(
              target_micro, kMeasuredTolerance,
              target < current ? std::optional(model.regime()) : std::nullopt)) {
        continue;
      }
      unmeasured_moves[i] = true;
      tightened = true;
      // Into sizes it never ran, the worker is planned with the zero-intercept line through
      // what it takes now, c(b) = c(current)·b / current. Whenever a step's time per sample
      // does not fall as its batch shrinks (a fixed cost, a knee, a wait for a core that a
      // slowdown does not scale), that line is at or below the true cost under the current
      // size and at or above it over it: a worker that loses samples is planned as cheap as it
      // can be and one that gains as dear, so no plan moves a worker past its true optimum
      // (the slowed worker's batch never has to rise again), and the rest of the way is
      // made once the sizes reached are measured. It replaces the x2/÷2 trust region, which
      // needed three plans for a 6x slowdown that moves a worker 1356 -> 232 (fulcrum-sim
      // slowdown6x) and still let the line's intercept overshoot where it was wrong.
      // Where two sizes of this regime are measured, the curve through them (cost_curve.h)
      // carries their slope past them instead (exact for a + k·b, still under a knee), so the
      // plan after the first measured landing goes the rest of the way at once.
      const int current_micro = (current + steps - 1) / steps;
      if (target_micro > kFarGrowth * current_micro) {
        // Except for a worker that would grow more than kFarGrowth-fold: from a batch that
        // small its time is nearly all fixed cost, and that line would never let it grow (the
        // e2e Python job's V100, and once its A100, put at batch 1 on warm-up timings, stayed
        // there). It is planned on its model, as far as FarGrowthBound allows, and measured
        // there before the rest of the way (the same continuation as above).
        const int bound = FarGrowthBound(workers_[i], spec, current_micro,
                                         (candidate->step_seconds - request.tail_seconds) / steps);
        if (bound < target_micro) spec.max_batch = std::min(spec.max_batch, bound);
        trust.push_back(workers_[i].info.id + " " + std::to_string(current) + "->" +
                        std::to_string(target) + " unmeasured, far (at most " +
                        std::to_string(bound * steps) + ")");
        continue;
      }
      const double at_current = MeasuredOrModelledSeconds(workers_[i], current_micro);
      spec.fixed_seconds = 0.0;
      spec.seconds_per_sample = at_current / current_micro;
      spec.measured = workers_[i].compute.CurrentRegimeCosts();
      trust.push_back(workers_[i].info.id + " " + std::to_string(current) + "->" +
                      std::to_string(target) + " unmeasured");
    }
    if (!tightened) break;
    Result<Plan> bounded_plan = MakePlan(bounded, *policy_);
    if (!bounded_plan.ok()) return std::nullopt;
    candidate = std::move(bounded_plan);
  }
  damping.clear();
  if (!trust.empty()) damping += "planned at its current time per sample: " + Join(trust);
  if (!held.empty()) {
    damping += std::string(damping.empty() ? "" : "; ") + "dwell: " + Join(held);
  }
  return std::move(*candidate);
}

std::string Controller::DescribeMoves(const PlanRequest& request, const Plan& plan) const {
  // The biggest relative moves first, at most kDescribedMoves of them: an Event note holds
  // 1 kB, and the moves that matter are the big ones.
  constexpr std::size_t kDescribedMoves = 4;
  std::vector<std::pair<double, std::string>> moves;
  for (std::size_t i = 0; i < workers_.size() && i < plan.workers.size(); ++i) {
    const int from = request.workers[i].current_batch;
    const int to = plan.workers[i].batch;
    if (from == to) continue;
    const ComputeTimeModel& model = workers_[i].compute;
    const int micro_from = (from + plan.accumulation_steps - 1) / plan.accumulation_steps;
    const int micro_to = plan.workers[i].micro_batch;
    char move[240];
    const std::optional<SizeRecord> measured = model.sizes().Find(micro_from);
    const bool target_measured = model.sizes().MeasuredNear(micro_to, kMeasuredTolerance);
    std::snprintf(move, sizeof move,
                  "%s %d->%d (speed x%.2f; %s %.4f s at %d; predicted %.4f s at %d, %s)",
                  workers_[i].info.id.c_str(), from, to, model.speed_factor(),
                  measured ? "measured" : "modelled",
                  measured ? measured->typical * model.speed_factor()
                           : model.Seconds(micro_from, workers_[i].planning_cost),
                  micro_from, model.Seconds(micro_to, workers_[i].planning_cost), micro_to,
                  target_measured ? "measured near" : "extrapolated");
    moves.emplace_back(std::abs(std::log((to + 1.0) / (from + 1.0))), move);
  }
  std::stable_sort(moves.begin(), moves.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  std::vector<std::string> described;
  for (std::size_t i = 0; i < moves.size() && i < kDescribedMoves; ++i) {
    described.push_back(moves[i].second);
  }
  if (moves.size() > kDescribedMoves) {
    described.push_back(std::to_string(moves.size() - kDescribedMoves) + " smaller moves");
  }
  return Join(described);
}

void Controller::RecordMoves(const Plan& previous, const Plan& adopted, int64_t step) {
  for (Worker& worker : workers_) {
    const auto before = std::find_if(previous.workers.begin(), previous.workers.end(),
                                     [&](const auto& w) { return w.id == worker.info.id; });
    const auto after = std::find_if(adopted.workers.begin(), adopted.workers.end(),
                                    [&](const auto& w) { return w.id == worker.info.id; });
    if (before == previous.workers.end() || after == adopted.workers.end() ||
        before->batch == after->batch) {
      continue;
    }
    worker.moved_at_step = step;
    worker.speed_when_moved = worker.compute.speed_factor();
    if (after->batch > before->batch) worker.shed_for_own_slowdown = false;
  }
}

double Controller::MeasuredOrModelledSeconds(const Worker& worker, int micro_batch) const {
  const ComputeTimeModel& model = worker.compute;
  return model.sizes().SettledIn(micro_batch, model.regime())
             ? model.sizes().Find(micro_batch)->typical * model.speed_factor()
             : model.Seconds(micro_batch, worker.planning_cost);
}

bool Controller::SpeedChangedSincePlan() const {
  return std::any_of(workers_.begin(), workers_.end(), [&](const Worker& worker) {
    return worker.speed_change_unplanned &&
           SpeedMovedBeyondNoise(worker, worker.speed_when_planned);
  });
}

double Controller::RequiredGain(bool speed_changed, bool finishing_move) const {
  // Answering a speed change beyond noise rests on the speed factor's evidence.
  if (speed_changed) return config_.min_gain;
  if (finishing_move) {
    // Finishing the answer to a change completes a plan already made, which stopped short on
    // purpose (min_gain left the split 5.5% off after a 6x slowdown). Before any change is
    // answered, the job converges from its priors, and a bar that low took 4% "gains" into
    // more unmeasured sizes (fulcrum-sim scale1000 lost 2% of its efficiency).
    return answered_speed_change_ ? config_.refinement_min_gain : config_.min_gain;
  }
  // After a change is answered the split rests on measured landings: a plan that answers no
  // new change compares typical times alone, and must beat what their noise can fake.
  return answered_speed_change_ ? std::max(config_.min_gain, NoiseGain()) : config_.min_gain;
}

double Controller::RefinementGain(double model_error) const {
  if (!answered_speed_change_) return config_.refinement_min_gain;
  // Two predictions' worth of the models' remaining error, gain_noise_sigmas of it: in the demo
  // a 4.3% refinement followed the answer to a slowdown, on models good to 1.9%.
  return std::max(config_.refinement_min_gain,
                  config_.gain_noise_sigmas * std::sqrt(2.0) * model_error);
}

double Controller::NoiseGain() const {
  double ratio_error = 0.0;
  for (const Worker& worker : workers_) {
    ratio_error = std::max(ratio_error, worker.compute.TypicalRatioError());
  }
  return config_.gain_noise_sigmas * ratio_error;
}

bool Controller::SpeedMovedBeyondNoise(const Worker& worker, double then) const {
  return then <= 0.0 ||
         std::abs(worker.compute.speed_factor() / then - 1.0) > config_.fitter.min_outlier_residual;
}

double Controller::MeasuredStepSeconds(double tail_seconds) const {
  double slowest = 0.0;
  for (const WorkerAssignment& assignment : plan_->workers) {
    const Worker* worker = Find(assignment.id);
    if (worker == nullptr || assignment.batch <= 0) continue;
    slowest = std::max(slowest, MeasuredOrModelledSeconds(*worker, assignment.micro_batch) *
                                    plan_->accumulation_steps);
  }
  return slowest + tail_seconds;
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
    const std::optional<Plan> previous = plan_;
    Adopt(std::move(*plan), std::move(*reason));
    answered_speed_change_ = false;  // new members, memory or targets: a new start
    for (Worker& worker : workers_) worker.shed_for_own_slowdown = false;
    if (previous) RecordMoves(*previous, *plan_, step);
    last_evaluation_step_ = step;
    decision.plan_changed = true;
  } else if (step - last_evaluation_step_ >= config_.interval_steps || SpeedChangeReady() ||
             ContinuationReady()) {
    last_evaluation_step_ = step;
    const bool speed_changed = SpeedChangedSincePlan();
    const bool finishing_move =
        !speed_changed && std::any_of(workers_.begin(), workers_.end(),
                                      [&](const Worker& worker) { return FinishesMove(worker); });
    const double min_gain = RequiredGain(speed_changed, finishing_move);
    // The workers a plan now would move in answer to their own change of speed: its first leg,
    // or the leg that finishes it.
    std::vector<bool> answering;
    std::vector<bool> slowed;  // answering its own slowdown
    // "; answers v100's speed x1.00 -> x0.84, a100's move": whose change a plan answers, so a
    // reader (and trainer_bench) can tell the answer to one change from that to another.
    std::vector<std::string> answered;
    for (const Worker& worker : workers_) {
      const bool changed =
          speed_changed && SpeedMovedBeyondNoise(worker, worker.speed_when_planned);
      const bool finishes = finishing_move && FinishesMove(worker);
      answering.push_back(changed || finishes);
      slowed.push_back(changed && worker.compute.speed_factor() > worker.speed_when_planned);
      if (changed) {
        answered.push_back(Format("%s's speed x%.2f -> x%.2f", worker.info.id.c_str(),
                                  worker.speed_when_planned, worker.compute.speed_factor()));
      } else if (finishes) {
        answered.push_back(worker.info.id + "'s move");
      }
    }
    const std::string answers = answered.empty() ? "" : "; answers " + Join(answered);
    std::string damping;
    std::vector<bool> unmeasured_moves;
    std::optional<Plan> candidate = DampedPlan(request, step, damping, unmeasured_moves);
    for (Worker& worker : workers_) {
      worker.speed_change_unplanned = false;
      worker.continuation.reset();
    }
    std::vector<int> current;
    for (const WorkerAssignment& assignment : plan_->workers) current.push_back(assignment.batch);
    // Against the lower of what the model predicts for the current split and what it measurably
    // takes: the line sits within its tolerance of each size's typical time, and a "gain" that
    // only moves a sample or two off a worker the line overrates is not one (in the demo it
    // gave the slowed A100 a sample back, 100 steps after the slowdown, for a predicted 7%
    // the measured period did not have).
    const double current_seconds =
        std::min(PredictStepSeconds(request, current, plan_->accumulation_steps),
                 MeasuredStepSeconds(request.tail_seconds));
    const double gain = candidate ? 1.0 - candidate->step_seconds / current_seconds : 0.0;
    const double model_error = ModelError();
    char reason[200];
    if (!candidate || candidate->accumulation_steps != plan_->accumulation_steps ||
        candidate->workers.size() != current.size()) {
      reason[0] = '\0';
    } else if (gain >= min_gain) {
      std::snprintf(reason, sizeof reason,
                    "predicted step time %.4f s -> %.4f s (%.1f%% gain >= %.1f%%%s)",
                    current_seconds, candidate->step_seconds, 100.0 * gain, 100.0 * min_gain,
                    finishing_move                ? ", finishing a move"
                    : min_gain > config_.min_gain ? ", timing noise"
                                                  : "");
    } else if (gain >= RefinementGain(model_error) &&
               model_error <= config_.refinement_error_ratio * plan_model_error_) {
      std::snprintf(reason, sizeof reason,
                    "refinement: model error %.2f%% -> %.2f%%, predicted step time %.4f s -> "
                    "%.4f s (%.1f%% gain)",
                    100.0 * plan_model_error_, 100.0 * model_error, current_seconds,
                    candidate->step_seconds, 100.0 * gain);
    } else {
      reason[0] = '\0';
    }
    // "; moves: ...; damped by ...": what a plan (adopted or declined) moves and what held it.
    const auto explain_moves = [&](const Plan& plan) {
      std::string text;
      if (const std::string moves = DescribeMoves(request, plan); !moves.empty()) {
        text += "; moves: " + moves;
      }
      if (!damping.empty()) text += "; damped by " + damping;
      return text;
    };
    if (reason[0] == '\0' && (speed_changed || finishing_move)) {
      // The evaluation a change of speed (or a landing) triggered adopted nothing: say why.
      std::string declined =
          !candidate
              ? Format("step %lld: no plan answers the speed change: no bounded split",
                       static_cast<long long>(step))
              : Format(
                    "step %lld: no plan answers the %s: predicted step time %.4f s -> "
                    "%.4f s (%.1f%% gain < %.1f%% required)",
                    static_cast<long long>(step), speed_changed ? "speed change" : "landing",
                    current_seconds, candidate->step_seconds, 100.0 * gain, 100.0 * min_gain);
      if (candidate && candidate->workers.size() == current.size()) {
        declined += explain_moves(*candidate);
      } else if (!damping.empty()) {
        declined += "; damped by " + damping;
      }
      Note(std::move(declined));
    }
    if (reason[0] != '\0') {
      std::string explained = reason + answers + explain_moves(*candidate);
      candidate->predicted_gain = gain;
      const Plan previous = *plan_;
      Adopt(std::move(*candidate), std::move(explained));
      for (std::size_t i = 0; i < workers_.size(); ++i) {
        const int left = previous.workers[i].micro_batch;
        if (answering[i] && plan_->workers[i].micro_batch != left) {
          workers_[i].landing_from = left;
        }
        if (slowed[i] && plan_->workers[i].micro_batch < left) {
          workers_[i].shed_for_own_slowdown = true;
        }
      }
      answered_speed_change_ = answered_speed_change_ || speed_changed;
      RecordMoves(previous, *plan_, step);
      // A move planned at the worker's current time per sample stops short of its optimum on
      // purpose; it goes on before the dwell ends, once the size it reached is measured
      // (MoveConfirmed), with the slope between the two measured sizes.
      // Once: a plan that finishes a move starts no other continuation, for any worker (a
      // chain of them, each on the low bar, once took the e2e Python job's slowed A100
      // 57 -> 24 -> 1, then back up to its minimum useful batch).
      for (std::size_t i = 0; !finishing_move && i < unmeasured_moves.size(); ++i) {
        if (!unmeasured_moves[i]) continue;
        workers_[i].continuation = plan_->workers[i].micro_batch;
        workers_[i].continued_from = previous.workers[i].micro_batch;
      }
      decision.plan_changed = true;
    }
  }
  decision.accumulation_steps = plan_->accumulation_steps;
  decision.batches = DitheredBatches(request, step);
  return decision;
}

}  // namespace fulcrum::balancer
