#include "operator/coordinator/job_session.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/backoff.h"
#include "common/log.h"
#include "operator/balancer/planner.h"

namespace fulcrum::coordinator {
namespace {

constexpr double kAverageWeight = 0.2;  // exponential average over ~5 steps
constexpr int64_t kMaxApplyLeadSteps = 1000;
// Plans of a generation remembered besides its first (sent_plans_); the trainer keeps the
// first and at least the latest 32 (trainer_image/trainer/membership/coordinator_link.cc).
constexpr std::size_t kKeptPlans = 64;
// A plan is measured over its first kPlanMeasuredSteps steps, shown from kMinPlanMeasuredSteps
// on (MeasureLastPlan); a calibration (predicted ÷ measured step time) below
// kPoorPlanCalibration is logged as a warning: 20% is beyond what timing noise moves a few
// steps' mean.
constexpr int64_t kMinPlanMeasuredSteps = 3;
constexpr int64_t kPlanMeasuredSteps = 10;
constexpr double kPoorPlanCalibration = 0.8;

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Status CheckFinite(double value, const char* field) {
  if (!std::isfinite(value) || value < 0.0) {
    return InvalidArgument(field, "must be a finite number >= 0");
  }
  return Ok();
}

Status CheckCounter(int64_t value, const char* field) {
  if (value < 0 || value > kMaxProgressCounter) {
    return InvalidArgument(field, "must be in [0, 2^50], not " + std::to_string(value));
  }
  return Ok();
}

Status ValidateReport(const fulcrum::v1::StepReport& report) {
  if (Status status = CheckCounter(report.step(), "step_report.step"); !status.ok()) return status;
  if (Status status = CheckCounter(report.generation(), "step_report.generation"); !status.ok()) {
    return status;
  }
  if (report.local_batch() < 0) return InvalidArgument("step_report.local_batch", "must be >= 0");
  if (report.peak_memory() < 0) return InvalidArgument("step_report.peak_memory", "must be >= 0");
  if (report.out_of_memory_micro_batch() < 0 ||
      report.out_of_memory_micro_batch() > std::max(report.local_batch(), 0)) {
    return InvalidArgument("step_report.out_of_memory_micro_batch", "must be in [0, local_batch]");
  }
  for (auto [value, field] :
       {std::pair{report.compute_seconds(), "step_report.compute_seconds"},
        std::pair{report.comm_seconds(), "step_report.comm_seconds"},
        std::pair{report.after_compute_seconds(), "step_report.after_compute_seconds"},
        std::pair{report.step_seconds(), "step_report.step_seconds"},
        std::pair{report.data_wait_seconds(), "step_report.data_wait_seconds"},
        std::pair{report.step_end_seconds(), "step_report.step_end_seconds"},
        std::pair{report.local_gradient_squared_norm(), "step_report.local_gradient_squared_norm"},
        std::pair{report.global_gradient_squared_norm(),
                  "step_report.global_gradient_squared_norm"}}) {
    if (Status status = CheckFinite(value, field); !status.ok()) return status;
  }
  return Ok();
}

double Median(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

}  // namespace

Result<JobSession> JobSession::Create(JobSessionConfig config) {
  if (Status status = ValidateJobConfig(config); !status.ok()) return status.error();
  balancer::ControllerConfig controller_config;
  controller_config.global_batch = config.global_batch;
  controller_config.policy = config.policy;
  controller_config.interval_steps = config.interval_steps;
  controller_config.min_gain = config.min_gain;
  controller_config.seed = config.seed;
  Result<balancer::Controller> controller = balancer::Controller::Create(controller_config);
  if (!controller.ok()) return controller.error();
  return JobSession(std::move(config), std::move(*controller));
}

JobSession::JobSession(JobSessionConfig config, balancer::Controller controller)
    : config_(std::move(config)), controller_(std::move(controller)), batch_tuner_(config_) {}

Status JobSession::Reconfigure(JobSessionConfig config, Clock::time_point now) {
  if (Status status = ValidateJobConfig(config); !status.ok()) return status;
  if (config.name != config_.name || config.token != config_.token) {
    return Error{ErrorCode::kFailedPrecondition,
                 "job \"" + config_.name +
                     "\" is running: its name and token cannot change; remove it first",
                 config.name != config_.name ? "name" : "token"};
  }
  // In adaptive mode the running B is the tuner's (a new globalBatchSize restarts it there).
  GlobalBatchTuner tuner = batch_tuner_;
  tuner.Reconfigure(config, completed_step_);
  if (Status status = controller_.Retune(tuner.global_batch(), config.policy, config.min_gain,
                                         config.interval_steps);
      !status.ok()) {
    return status;
  }
  batch_tuner_ = std::move(tuner);
  const bool limits_changed =
      config.max_workers != config_.max_workers || config.min_workers != config_.min_workers;
  if (config.global_batch != config_.global_batch || limits_changed) {
    log::Info("coordinator", config_.name, "job reconfigured",
              {{"global_batch", config.global_batch},
               {"min_workers", config.min_workers},
               {"max_workers", config.max_workers}});
  }
  if (config.learning_rate != config_.learning_rate || config.total_steps != config_.total_steps) {
    log::Info("coordinator", config_.name, "recipe edited: sent with the next plan lead",
              {{"learning_rate", config.learning_rate}, {"total_steps", config.total_steps}});
    recipe_pending_ = membership_generation_ > 0;
  }
  config_ = std::move(config);
  if (limits_changed && membership_generation_ > 0) {
    ScheduleGeneration(now, "worker limits changed", /*force=*/false);
  }
  return Ok();
}

JobSession::Member* JobSession::Find(std::string_view pod) {
  const auto it = members_.find(pod);
  return it == members_.end() ? nullptr : &it->second;
}

void JobSession::Heard(Member& member, Clock::time_point now) {
  member.last_seen = now;
  if (!member.hung) return;
  member.hung = false;
  HangTimeoutOf(member, now);  // forgives the strikes that decayed first
  ++member.hang_strikes;
  member.last_hang_strike = now;
  log::Info("coordinator", config_.name, "hung trainer speaks again; taking it back",
            {{"pod", member.hello.pod()},
             {"next_hang_timeout_ms",
              std::chrono::duration_cast<std::chrono::milliseconds>(HangTimeoutOf(member, now))
                  .count()}});
  ScheduleGeneration(now, "responding again: " + member.hello.pod(), /*force=*/false);
}

Clock::duration JobSession::HangTimeoutOf(Member& member, Clock::time_point now) const {
  while (member.hang_strikes > 0 && now - member.last_hang_strike >= kHangStrikeDecay) {
    --member.hang_strikes;
    member.last_hang_strike += kHangStrikeDecay;
  }
  return BackoffPolicy{.initial = config_.hang_timeout, .max = config_.heartbeat_timeout}.DelayAt(
      member.hang_strikes);
}

void JobSession::FindHungMembers(Clock::time_point now) {
  if (config_.hang_timeout.count() == 0 || ranks_.size() < 2) return;
  // "Others were heard" uses the plain timeout: it asks whether the coordinator hears the
  // generation at all, not whether one member has used up its own allowance.
  auto heard_lately = [&](const Member& member) {
    return now - member.last_seen <= config_.hang_timeout;
  };
  auto silent = [&](Member& member) { return now - member.last_seen > HangTimeoutOf(member, now); };
  std::vector<Member*> candidates;
  int heard = 0;
  for (const std::string& pod : ranks_) {
    Member* member = Find(pod);
    if (member == nullptr || !member->connected || member->hung) continue;
    if (heard_lately(*member)) ++heard;
    if (silent(*member)) candidates.push_back(member);
  }
  // A hang is one member (or a few) falling silent while the rest of the generation is heard.
  // When most of it is silent, the silence is this coordinator's (it stalled, or it drains a
  // backlog of reads in no particular order) or the network's: nobody is hung. Seen at 3,200
  // emulated trainers on an overloaded machine, where one member's message was read first and
  // the seven others of its job were taken for hung.
  if (candidates.empty() || static_cast<int>(candidates.size()) > heard) return;
  for (Member* member : candidates) {
    const std::string& pod = member->hello.pod();
    member->hung = true;
    const auto silent_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - member->last_seen).count();
    log::Warn("coordinator", config_.name, "trainer is silent while its peers are not: hung",
              {{"pod", pod}, {"silent_ms", silent_ms}});
    ScheduleGeneration(now, "hung (silent " + std::to_string(silent_ms) + " ms): " + pod,
                       /*force=*/true);
  }
}

Status JobSession::Join(const fulcrum::v1::Hello& hello, Clock::time_point now, Outbox& out,
                        std::string_view peer_host) {
  if (Status status = CheckCounter(hello.step(), "hello.step"); !status.ok()) return status;
  if (hello.gpu_memory() < 0) return InvalidArgument("hello.gpu_memory", "must be >= 0");
  if (Status status = CheckCounter(hello.generation(), "hello.generation"); !status.ok()) {
    return status;
  }
  // Before its first generation a session learns the generation from the trainers (it may be a
  // new leader's, with trainers far into the job); after it, a trainer can only be in one it
  // announced.
  if (generations_formed_ > 0 && hello.generation() > membership_generation_ + 1) {
    return InvalidArgument("hello.generation",
                           "generation " + std::to_string(hello.generation()) +
                               " was never announced: this job is at generation " +
                               std::to_string(membership_generation_));
  }
  for (const auto& [pod, member] : members_) {
    if (pod != hello.pod() && member.connected &&
        member.hello.store_address() == hello.store_address()) {
      return Error{ErrorCode::kAlreadyExists,
                   "store address " + hello.store_address() + " is pod \"" + pod +
                       "\"'s: every trainer serves its own TCPStore",
                   "hello.store_address"};
    }
  }
  if (Member* known = Find(hello.pod())) {
    const bool same_process = known->hello.store_address() == hello.store_address();
    if (same_process && !peer_host.empty() && !known->peer_host.empty() &&
        known->peer_host != peer_host) {
      // The same process reconnects from its own address; a stream from elsewhere that copies
      // a member's name and store address would take over its assignments.
      return Error{ErrorCode::kAlreadyExists,
                   "pod \"" + hello.pod() + "\" trains from " + known->peer_host + ", not from " +
                       std::string(peer_host) + ": give every trainer its own --pod",
                   "hello.pod"};
    }
    if (known->connected && !same_process) {
      return Error{ErrorCode::kAlreadyExists,
                   "pod \"" + hello.pod() +
                       "\" is already connected from another process: give every trainer its own "
                       "--pod",
                   "hello.pod"};
    }
    known->connected = true;
    Heard(*known, now);
    if (!peer_host.empty()) known->peer_host = std::string(peer_host);
    if (same_process && known->rank >= 0) {
      // A reconnect after a network blip: the trainer kept training; tell it where it stands.
      log::Info("coordinator", config_.name, "trainer reconnected", {{"pod", hello.pod()}});
      Outbox everyone;
      SendAssignments(last_decided_step_, "reconnected", everyone);
      for (Outgoing& message : everyone) {
        if (message.pod == hello.pod()) out.push_back(std::move(message));
      }
      return Ok();
    }
    known->hello = hello;
    known->rank = -1;
    hello_step_ = std::max(hello_step_, hello.step());
    ScheduleForcedGeneration(*known, now, "restarted: " + hello.pod());
    return Ok();
  }
  // After a coordinator restart, trainers still train in generations numbered by the old
  // one: continue above them, so the next generation is recognisably newer to everyone.
  if (generations_formed_ == 0) {
    membership_generation_ = std::max(membership_generation_, hello.generation());
  }
  hello_step_ = std::max(hello_step_, hello.step());
  Member member;
  member.hello = hello;
  member.peer_host = std::string(peer_host);
  member.join_sequence = next_join_sequence_++;
  member.last_seen = now;
  members_.emplace(hello.pod(), std::move(member));
  log::Info("coordinator", config_.name, "trainer joined",
            {{"pod", hello.pod()},
             {"node", hello.node()},
             {"gpu_product", hello.gpu_product()},
             {"gpu_memory", hello.gpu_memory()}});
  ScheduleGeneration(now, "joined: " + hello.pod(), /*force=*/false);
  return Ok();
}

void JobSession::Disconnect(std::string_view pod, Clock::time_point now) {
  Member* member = Find(pod);
  if (member == nullptr || !member->connected) return;
  member->connected = false;
  member->disconnected_at = now;
  log::Info("coordinator", config_.name, "trainer stream closed",
            {{"pod", pod}, {"leave_after_ms", config_.leave_timeout.count()}});
}

void JobSession::ScheduleGeneration(Clock::time_point now, std::string reason, bool force) {
  pending_since_ = now;  // settle counts from the latest event, folding a burst into one
  pending_reason_ += (pending_reason_.empty() ? "" : "; ") + reason;
  pending_force_ = pending_force_ || force;
}

void JobSession::ScheduleForcedGeneration(Member& member, Clock::time_point now,
                                          std::string reason) {
  if (now < member.forced_deferred_until) return;  // folded into the deferred one
  // A pod out of tokens is not refused (an honest trainer whose peers keep failing still gets
  // its generation) but deferred until its next token, which Reserve holds for it.
  const Clock::duration wait = member.forced_generations.Reserve(now);
  if (wait > Clock::duration::zero()) {
    member.forced_deferred_until = now + wait;
    not_before_ = std::max(not_before_, member.forced_deferred_until);
    log::Warn("coordinator", config_.name, "pod asks to re-form too often; deferring",
              {{"pod", member.hello.pod()},
               {"reason", reason},
               {"deferred_ms", std::chrono::duration_cast<std::chrono::milliseconds>(
                                   member.forced_deferred_until - now)
                                   .count()}});
  }
  ScheduleGeneration(now, std::move(reason), /*force=*/true);
}

// controller_members_ follows every change the controller accepted, also when a later one
// fails, so the next attempt starts from what the controller really holds.
Status JobSession::SyncControllerMembers(const std::vector<std::string>& pods) {
  for (auto it = controller_members_.begin(); it != controller_members_.end();) {
    if (std::find(pods.begin(), pods.end(), *it) != pods.end()) {
      ++it;
      continue;
    }
    if (Status status = controller_.RemoveWorker(*it); !status.ok()) return status;
    it = controller_members_.erase(it);
  }
  for (const std::string& pod : pods) {
    if (std::find(controller_members_.begin(), controller_members_.end(), pod) !=
        controller_members_.end()) {
      continue;
    }
    const Member& member = members_.at(pod);
    balancer::WorkerInfo info;
    info.id = pod;
    info.gpu_product = member.hello.gpu_product();
    info.memory_bytes = member.hello.gpu_memory();
    // Every worker takes at least one sample when B allows it; otherwise some may idle.
    info.min_batch = batch_tuner_.global_batch() >= static_cast<int>(pods.size()) ? 1 : 0;
    if (Status status = controller_.AddWorker(info); !status.ok()) return status;
    controller_members_.push_back(pod);
  }
  controller_members_ = pods;  // the same set, in rank order
  return Ok();
}

Status JobSession::DecidePlan(int64_t step, std::string* reason) {
  last_decided_step_ = std::max(last_decided_step_, step);
  Result<balancer::StepDecision> decision = controller_.Decide(last_decided_step_);
  for (const std::string& note : controller_.TakeNotes()) {
    log::Info("coordinator", config_.name, "balancer", {{"note", note}});
  }
  if (!decision.ok()) return decision.error();
  const balancer::Plan& plan = controller_.plan();
  std::vector<int> by_rank(ranks_.size(), 0);
  for (std::size_t i = 0; i < plan.workers.size(); ++i) {
    const auto rank = std::find(ranks_.begin(), ranks_.end(), plan.workers[i].id) - ranks_.begin();
    if (static_cast<std::size_t>(rank) >= ranks_.size()) {
      return MakeError(ErrorCode::kInternal,
                       "the balancer plans for \"" + plan.workers[i].id + "\", not a member");
    }
    by_rank[static_cast<std::size_t>(rank)] = decision->batches[i];
  }
  *reason = decision->plan_changed ? plan.reason : "batch dither (identifying c(b) = a + k*b)";
  if (decision->plan_changed) {
    // The plan it replaces, if it ran too few steps to be logged at kPlanMeasuredSteps.
    if (last_rebalance_.measured_steps < kPlanMeasuredSteps) LogPlanMeasured();
    // A plan made on a worker's catalog prior alone predicts no time of its own to check.
    const bool all_measured = std::all_of(ranks_.begin(), ranks_.end(), [&](const auto& pod) {
      const balancer::ComputeTimeModel* model = controller_.Model(pod);
      return model != nullptr && model->observations() > 0;
    });
    last_rebalance_ = {.apply_at_step = last_decided_step_,
                       .reason = plan.reason,
                       .unix_seconds = UnixSeconds(),
                       .batches = by_rank,
                       .predicted_gain = plan.predicted_gain,
                       .predicted_step_seconds = all_measured ? plan.step_seconds : 0.0};
  }
  const bool changed = by_rank != batches_ || accumulation_steps_ != decision->accumulation_steps;
  batches_ = std::move(by_rank);
  accumulation_steps_ = decision->accumulation_steps;
  if (!changed) reason->clear();
  return Ok();
}

void JobSession::RetryFormation(Clock::time_point now, const std::string& reason,
                                const Error& error) {
  ++formation_failures_;
  formation_error_ = error.ToString();
  const Clock::duration delay =
      BackoffPolicy{.initial = config_.settle, .max = kMaxFormationRetryDelay}.DelayAt(
          formation_failures_);
  log::Error(
      "coordinator", config_.name, "cannot form a generation; retrying",
      {{"error", formation_error_},
       {"attempts", formation_failures_},
       {"retry_in_ms", std::chrono::duration_cast<std::chrono::milliseconds>(delay).count()}});
  // Pending again, forced (the same members must be tried again), after the back-off; a new
  // membership event retries sooner.
  pending_since_ = now;
  pending_reason_ = reason;
  pending_force_ = true;
  not_before_ = std::max(not_before_, now + delay);
}

void JobSession::FormGeneration(Clock::time_point now, Outbox& out) {
  std::vector<const Member*> candidates;
  for (const auto& [pod, member] : members_) {
    if (member.connected && !member.hung) candidates.push_back(&member);
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const Member* a, const Member* b) { return a->join_sequence < b->join_sequence; });
  if (config_.max_workers > 0 &&
      candidates.size() > static_cast<std::size_t>(config_.max_workers)) {
    candidates.resize(static_cast<std::size_t>(config_.max_workers));
  }
  std::vector<std::string> pods;
  for (const Member* member : candidates) pods.push_back(member->hello.pod());
  const std::string reason = pending_reason_;
  const bool force = pending_force_;
  pending_since_.reset();
  pending_reason_.clear();
  pending_force_ = false;
  if (pods == ranks_ && !force && membership_generation_ > 0) return;  // e.g. a spare joined

  if (Status status = SyncControllerMembers(pods); !status.ok()) {
    RetryFormation(now, reason, status.error());
    return;
  }
  ++membership_generation_;
  waiting_for_min_workers_ = false;
  // A member that left in band has already left every collective of the old generation with
  // the others; one that did not (hung, or gone) never will, so its peers must not wait for it.
  abandon_previous_ = std::any_of(ranks_.begin(), ranks_.end(), [&](const std::string& pod) {
    return std::find(pods.begin(), pods.end(), pod) == pods.end();
  });
  for (auto& [pod, member] : members_) member.rank = -1;
  ranks_ = pods;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    members_.at(ranks_[rank]).rank = static_cast<int>(rank);
  }
  reporters_by_step_.clear();
  samples_by_step_.clear();
  batch_tuner_.ForgetIncompleteSteps();
  end_by_step_.clear();
  batches_.clear();
  sent_plans_.clear();
  last_sent_apply_step_ = 0;
  completed_step_in_generation_.reset();
  steps_in_generation_ = 0;
  std::string plan_reason;
  if (Status status = DecidePlan(std::max(completed_step_ + 1, hello_step_), &plan_reason);
      !status.ok()) {
    // This generation is never announced: its members keep training in the last one until
    // the retry forms the next (numbered above it).
    RetryFormation(now, reason, status.error());
    return;
  }
  ++generations_formed_;
  formation_error_.clear();
  formation_failures_ = 0;
  generation_reason_ = reason;
  generation_step_ = last_decided_step_;
  log::Info("coordinator", config_.name, "new generation",
            {{"membership_generation", membership_generation_},
             {"members", ranks_},
             {"batches", batches_},
             {"reason", reason}});
  SendAssignments(0, "generation " + std::to_string(membership_generation_) + ": " + reason, out);
}

void JobSession::SendAssignments(int64_t apply_at_step, const std::string& reason, Outbox& out) {
  // Rank 0 may have left while the next generation is pending: that one tells everyone.
  const auto first = ranks_.empty() ? members_.end() : members_.find(ranks_.front());
  if (first == members_.end() || batches_.size() != ranks_.size()) return;
  last_sent_apply_step_ = std::max(last_sent_apply_step_, apply_at_step);
  if (sent_plans_.empty() || sent_plans_.back() != batches_) {
    if (sent_plans_.size() > kKeptPlans) sent_plans_.erase(sent_plans_.begin() + 1);
    sent_plans_.push_back(batches_);
  }
  const std::string rendezvous = first->second.hello.store_address();
  // B of this plan: after a live edit of the global batch, the new B is split at the next
  // completed step, and until then the batches still add up to the old one.
  const int plan_batch = std::accumulate(batches_.begin(), batches_.end(), 0);
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    Outgoing message{ranks_[rank], {}};
    fulcrum::v1::Assignment& assignment = *message.message.mutable_assignment();
    assignment.set_generation(membership_generation_);
    assignment.set_rank(static_cast<int>(rank));
    assignment.set_world_size(static_cast<int>(ranks_.size()));
    assignment.set_rendezvous_address(rendezvous);
    assignment.set_local_batch(batches_[rank]);
    assignment.set_global_batch(plan_batch);
    assignment.set_apply_at_step(apply_at_step);
    for (int batch : batches_) assignment.add_batches(batch);
    assignment.set_accumulation_steps(accumulation_steps_);
    assignment.set_abandon_previous(abandon_previous_);
    assignment.set_learning_rate(batch_tuner_.learning_rate());
    assignment.set_sample_efficiency(batch_tuner_.sample_efficiency());
    assignment.set_total_steps(config_.total_steps);
    assignment.set_reason(reason);
    out.push_back(std::move(message));
  }
}

Status JobSession::CheckReportGeneration(int64_t generation) const {
  if (generation > membership_generation_) {
    return InvalidArgument("step_report.generation",
                           "generation " + std::to_string(generation) +
                               " was never announced; the current one is " +
                               std::to_string(membership_generation_));
  }
  if (generation < membership_generation_ - 1) {
    return Error{ErrorCode::kFailedPrecondition,
                 "stale generation " + std::to_string(generation) + " (current is " +
                     std::to_string(membership_generation_) + "): follow the latest Assignment",
                 "step_report.generation"};
  }
  return Ok();
}

Status JobSession::Evaluated(std::string_view pod, const fulcrum::v1::Evaluation& evaluation,
                             Clock::time_point now) {
  Member* member = Find(pod);
  if (member == nullptr) return MakeError(ErrorCode::kNotFound, "not a member: say Hello first");
  Heard(*member, now);
  if (Status status = CheckCounter(evaluation.step(), "evaluation.step"); !status.ok())
    return status;
  if (Status status = CheckCounter(evaluation.samples(), "evaluation.samples"); !status.ok())
    return status;
  if (Status status = CheckFinite(evaluation.seconds(), "evaluation.seconds"); !status.ok())
    return status;
  if (evaluation.has_accuracy() && !(evaluation.accuracy() >= 0.0 && evaluation.accuracy() <= 1.0))
    return InvalidArgument("evaluation.accuracy", "must be in [0, 1]");
  if (evaluation.step() < last_evaluation_.step) return Ok();  // an older one, late
  last_evaluation_ = EvaluationSnapshot{
      .step = evaluation.step(),
      .loss = evaluation.loss(),
      .accuracy =
          evaluation.has_accuracy() ? std::optional<double>(evaluation.accuracy()) : std::nullopt,
      .samples = evaluation.samples(),
      .seconds = evaluation.seconds(),
      .unix_seconds =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count()};
  return Ok();
}

Status JobSession::Report(std::string_view pod, const fulcrum::v1::StepReport& report,
                          Clock::time_point now, Outbox& out) {
  Member* member = Find(pod);
  if (member == nullptr) return MakeError(ErrorCode::kNotFound, "not a member: say Hello first");
  Heard(*member, now);
  if (Status status = ValidateReport(report); !status.ok()) return status;
  if (Status status = CheckReportGeneration(report.generation()); !status.ok()) return status;
  // In flight while the generation changed, or from a trainer that is not (yet) a member of
  // the current generation, e.g. one still training after this coordinator restarted.
  if (report.generation() < membership_generation_ || member->rank < 0) return Ok();
  if (Status status = CheckReportClaims(*member, report); !status.ok()) return status;
  member->last_report = report;
  if (std::isfinite(report.global_loss())) training_loss_ = report.global_loss();
  if (report.step_seconds() > 0.0) {
    const double fraction =
        std::clamp(report.data_wait_seconds() / report.step_seconds(), 0.0, 1.0);
    member->data_wait_fraction += kDataWaitWeight * (fraction - member->data_wait_fraction);
  }
  balancer::StepReport observation;
  observation.worker_id = std::string(pod);
  observation.step = report.step();
  observation.local_batch = report.local_batch();
  observation.accumulation_steps = std::max(1, accumulation_steps_);
  observation.compute_seconds = report.compute_seconds();
  // The balancer's tail is everything after compute; older trainers send the all-reduce only.
  observation.comm_seconds =
      report.after_compute_seconds() > 0.0 ? report.after_compute_seconds() : report.comm_seconds();
  observation.peak_memory_bytes = report.peak_memory();
  observation.out_of_memory = report.out_of_memory();
  if (report.out_of_memory() && report.out_of_memory_micro_batch() > 0) {
    // The trainer says which micro-batch failed (it may have split further than the plan).
    observation.local_batch = report.out_of_memory_micro_batch();
    observation.accumulation_steps = 1;
  }
  // A partial last step is not a measurement of the plan's batch.
  if (!report.partial()) {
    if (Status status = controller_.Observe(observation); !status.ok()) return status;
  }

  // What the step committed, and when it ended on rank 0's clock (the one clock throughput
  // is measured on).
  samples_by_step_[report.step()] += report.local_batch();
  batch_tuner_.Report(report.step(), report.local_batch(), report.local_gradient_squared_norm(),
                      report.global_gradient_squared_norm());
  if (member->rank == 0 && report.step_end_seconds() > 0.0) {
    end_by_step_[report.step()] = report.step_end_seconds();
  }
  std::set<std::string>& reporters = reporters_by_step_[report.step()];
  reporters.insert(std::string(pod));
  if (reporters.size() == ranks_.size()) {
    reporters_by_step_.erase(reporters_by_step_.begin(),
                             std::next(reporters_by_step_.find(report.step())));
    OnStepComplete(report.step(), out);
  }
  return Ok();
}

void JobSession::OnStepComplete(int64_t step, Outbox& out) {
  const auto counted = samples_by_step_.find(step);
  const int samples = counted != samples_by_step_.end() ? counted->second : 0;
  if (const auto end = end_by_step_.find(step); end != end_by_step_.end() && !ranks_.empty()) {
    const std::string clock = ranks_.front() + "@" + std::to_string(membership_generation_);
    throughput_.Add(step, samples, end->second, clock);
    MeasureLastPlan(step, end->second, clock);
  }
  samples_by_step_.erase(samples_by_step_.begin(), samples_by_step_.upper_bound(step));
  end_by_step_.erase(end_by_step_.begin(), end_by_step_.upper_bound(step));
  if (const std::optional<double> rate = throughput_.SamplesPerSecond()) {
    samples_per_second_average_ = *rate;
    step_seconds_average_ = throughput_.StepSeconds().value_or(step_seconds_average_);
  } else {
    // Trainers that do not send step_end_seconds: the median rank's step time, smoothed.
    std::vector<double> step_seconds;
    for (const std::string& pod : ranks_) {
      // A member that reported this step and left since (its generation's end is pending)
      // counts no more.
      const auto member = members_.find(pod);
      if (member == members_.end() || !member->second.last_report) continue;
      step_seconds.push_back(member->second.last_report->step_seconds());
    }
    if (!step_seconds.empty()) {
      const double seconds = Median(step_seconds);
      const double first = completed_step_ < 0 || step_seconds_average_ == 0.0;
      step_seconds_average_ =
          first ? seconds : (1 - kAverageWeight) * step_seconds_average_ + kAverageWeight * seconds;
      if (seconds > 0.0) {
        const double rate = samples / seconds;
        samples_per_second_average_ =
            samples_per_second_average_ == 0.0
                ? rate
                : (1 - kAverageWeight) * samples_per_second_average_ + kAverageWeight * rate;
      }
    }
  }
  if (step > completed_step_) ++steps_in_generation_;
  completed_step_ = std::max(completed_step_, step);
  completed_step_in_generation_ = std::max(completed_step_in_generation_.value_or(step), step);
  MeasureBalance();
  int64_t lead = config_.min_apply_lead_steps;
  if (step_seconds_average_ > 0.0) {
    lead = std::max<int64_t>(
        lead, static_cast<int64_t>(std::ceil(config_.apply_lead_seconds / step_seconds_average_)));
  }
  lead = std::min(lead, kMaxApplyLeadSteps);
  // Never before an update already sent: trainers take the one with the highest apply step they
  // have reached, so a later update that applied earlier would be overridden by the older one
  // (and its older recipe) once that one's step came, as the lead shrinks when steps slow down.
  const int64_t apply_at = std::max(step + lead, last_sent_apply_step_);
  // The global batch itself (spec.batching adaptive), before this step's plan decision: a new B
  // is split and sent, with its learning rate, in the plan decided below.
  if (const std::optional<GlobalBatchChange> change = batch_tuner_.OnStepComplete(
          step, samples, apply_at,
          [this](int batch) { return controller_.PredictedStepSeconds(batch); })) {
    if (Status status = controller_.Retune(change->to, config_.policy, config_.min_gain,
                                           config_.interval_steps);
        !status.ok()) {
      log::Error("coordinator", config_.name, "the balancer refused the new global batch",
                 {{"global_batch", change->to}, {"error", status.error().ToString()}});
    } else {
      log::Info("coordinator", config_.name, "global batch changed",
                {{"step", step},
                 {"from", change->from},
                 {"to", change->to},
                 {"learning_rate", change->learning_rate},
                 {"noise_scale", change->noise_scale},
                 {"sample_efficiency", change->sample_efficiency},
                 {"reason", change->reason}});
    }
  }
  std::string reason;
  if (Status status = DecidePlan(apply_at, &reason); !status.ok()) {
    log::Error("coordinator", config_.name, "balancer could not plan",
               {{"error", status.error().ToString()}});
    return;
  }
  if (reason.empty() && recipe_pending_) {
    // The same batches with the edited recipe, a plan lead ahead like a new plan.
    recipe_pending_ = false;
    SendAssignments(apply_at, "recipe edited", out);
    return;
  }
  if (reason.empty()) return;
  recipe_pending_ = false;  // the new plan carries it
  log::Info("coordinator", config_.name, "new batches",
            {{"membership_generation", membership_generation_},
             {"apply_at_step", last_decided_step_},
             {"batches", batches_},
             {"reason", reason}});
  SendAssignments(last_decided_step_, reason, out);
}

// What a report of the current generation claims, against what this session knows: its own
// steps only go forward, it stays near the steps the others are at, and it trained a batch the
// coordinator gave its rank. An honest trainer never fails these; a token holder that lies
// would skew the fits or grow the per-step bookkeeping.
Status JobSession::CheckReportClaims(const Member& member,
                                     const fulcrum::v1::StepReport& report) const {
  if (member.last_report && member.last_report->generation() == report.generation() &&
      report.step() <= member.last_report->step()) {
    return InvalidArgument("step_report.step",
                           "went back from " + std::to_string(member.last_report->step()) + " to " +
                               std::to_string(report.step()) + " within generation " +
                               std::to_string(report.generation()));
  }
  std::optional<int64_t> reference = completed_step_in_generation_;
  if (!reference && !reporters_by_step_.empty()) reference = reporters_by_step_.begin()->first;
  if (reference && report.step() > *reference + kMaxReportStepLead) {
    return InvalidArgument("step_report.step",
                           "step " + std::to_string(report.step()) + " is more than " +
                               std::to_string(kMaxReportStepLead) + " ahead of step " +
                               std::to_string(*reference) + ", where this generation is");
  }
  const auto rank = static_cast<std::size_t>(member.rank);
  // A partial last step trains fewer samples than the plan gave (never more).
  const bool assigned = std::any_of(sent_plans_.begin(), sent_plans_.end(), [&](const auto& plan) {
    return rank < plan.size() && (plan[rank] == report.local_batch() ||
                                  (report.partial() && report.local_batch() <= plan[rank]));
  });
  if (!assigned) {
    return InvalidArgument("step_report.local_batch",
                           "rank " + std::to_string(member.rank) + " was never assigned " +
                               std::to_string(report.local_batch()) + " samples in generation " +
                               std::to_string(report.generation()) + "; its batch is " +
                               std::to_string(rank < batches_.size() ? batches_[rank] : 0));
  }
  return Ok();
}

Status JobSession::Heartbeat(std::string_view pod, const fulcrum::v1::Heartbeat& heartbeat,
                             Clock::time_point now) {
  Member* member = Find(pod);
  if (member == nullptr) return MakeError(ErrorCode::kNotFound, "not a member: say Hello first");
  if (heartbeat.generation() > membership_generation_) {
    return InvalidArgument("heartbeat.generation", "was never announced; current is " +
                                                       std::to_string(membership_generation_));
  }
  Heard(*member, now);
  return Ok();
}

Status JobSession::Rejoin(std::string_view pod, const fulcrum::v1::Rejoin& rejoin,
                          Clock::time_point now) {
  Member* member = Find(pod);
  if (member == nullptr) return MakeError(ErrorCode::kNotFound, "not a member: say Hello first");
  Heard(*member, now);
  if (rejoin.generation() > membership_generation_) {
    return InvalidArgument("rejoin.generation", "was never announced; current is " +
                                                    std::to_string(membership_generation_));
  }
  if (rejoin.generation() < membership_generation_) return Ok();  // already re-formed since
  log::Warn("coordinator", config_.name, "trainer fell out of its generation",
            {{"pod", pod}, {"generation", rejoin.generation()}, {"reason", rejoin.reason()}});
  ScheduleForcedGeneration(*member, now, "rejoin requested by " + std::string(pod));
  return Ok();
}

std::vector<std::string> JobSession::Tick(Clock::time_point now, Outbox& out) {
  std::vector<std::string> silent;
  for (auto it = members_.begin(); it != members_.end();) {
    Member& member = it->second;
    if (member.connected && now - member.last_seen > config_.heartbeat_timeout) {
      log::Warn("coordinator", config_.name, "trainer missed its heartbeats; removing it",
                {{"pod", it->first}});
      silent.push_back(it->first);
      member.connected = false;
      member.disconnected_at = now - config_.leave_timeout;
    }
    if (!member.connected && now - member.disconnected_at >= config_.leave_timeout) {
      log::Info("coordinator", config_.name, "trainer left", {{"pod", it->first}});
      if (member.rank >= 0) ScheduleGeneration(now, "left: " + it->first, /*force=*/true);
      it = members_.erase(it);
      continue;
    }
    ++it;
  }
  FindHungMembers(now);
  const auto connected = std::count_if(members_.begin(), members_.end(), [](const auto& entry) {
    return entry.second.connected && !entry.second.hung;
  });
  // min_workers gates a start: the first generation, or the first after every trainer left
  // (a whole-job restart). In between, the job goes on with whoever is left.
  if (connected == 0) waiting_for_min_workers_ = true;
  const bool enough = connected >= (waiting_for_min_workers_ ? config_.min_workers : 1);
  if (pending_since_ && now - *pending_since_ >= config_.settle && now >= not_before_ && enough) {
    FormGeneration(now, out);
  }
  return silent;
}

void JobSession::SendControl(fulcrum::v1::Control::Action action, const std::string& reason,
                             Outbox& out) {
  for (const auto& [pod, member] : members_) {
    if (!member.connected) continue;
    Outgoing message{pod, {}};
    message.message.mutable_control()->set_action(action);
    message.message.mutable_control()->set_reason(reason);
    out.push_back(std::move(message));
  }
}

// Balance efficiency η = T(best) / T(current) under one step-time model: the balancer's
// per-worker curves (measured per-size costs where they exist, the line only between and
// beyond them) plus the measured tail, with the split's own accumulation and bounds that admit
// the current split, so the best split can only be faster: η <= 1 by construction. How well
// that model reproduces the measured step time is reported apart, as its calibration, so a
// wrong model shows as poor calibration instead of as an efficiency above 1. The ideal rate is
// the model's optimum rescaled to reproduce the measured period: measured rate ÷ η.
void JobSession::MeasureBalance() {
  efficiency_ = 0.0;
  calibration_ = 0.0;
  ideal_samples_per_second_ = 0.0;
  if (ranks_.empty() || batches_.size() != ranks_.size()) return;
  balancer::PlanRequest request;
  request.global_batch = std::accumulate(batches_.begin(), batches_.end(), 0);
  request.tail_seconds = controller_.TailSeconds();
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    std::optional<balancer::WorkerSpec> spec = controller_.PlanningSpec(ranks_[rank]);
    if (!spec || request.global_batch <= 0) return;
    spec->min_batch = std::min(spec->min_batch, batches_[rank]);
    spec->max_batch = std::max(spec->max_batch, batches_[rank]);
    request.workers.push_back(std::move(*spec));
  }
  const std::vector<balancer::SplitWorker> split =
      balancer::SplitWorkersFor(request, accumulation_steps_);
  const Result<std::vector<int>> best = balancer::MinMaxSplit(split, request.global_batch);
  if (!best.ok()) return;
  const double current = balancer::BottleneckCost(split, batches_) + request.tail_seconds;
  const double optimum = balancer::BottleneckCost(split, *best) + request.tail_seconds;
  if (!(current > 0.0)) return;
  efficiency_ = optimum / current;
  if (step_seconds_average_ > 0.0) calibration_ = current / step_seconds_average_;
  if (efficiency_ > 0.0) ideal_samples_per_second_ = samples_per_second_average_ / efficiency_;
}

// The last plan's calibration: its predicted step time against the wall time per step of the
// steps that ran it, on rank 0's clock (from the end of the step before its first), over its
// first kPlanMeasuredSteps steps, shown from kMinPlanMeasuredSteps on: a plan the balancer
// replaces within a few steps (its landing contradicted the model) is measured too, and that is
// when the prediction was worst. Below kPoorPlanCalibration the model predicted a split it had
// not run badly, which the efficiency (computed under that model) cannot show.
void JobSession::MeasureLastPlan(int64_t step, double end_seconds, const std::string& clock) {
  RebalanceSnapshot& plan = last_rebalance_;
  if (plan.apply_at_step < 0 || !(plan.predicted_step_seconds > 0.0) ||
      step < plan.apply_at_step - 1) {
    return;
  }
  if (!plan_start_ || plan_start_->apply_at_step != plan.apply_at_step ||
      plan_start_->clock != clock) {
    plan_start_ = PlanStart{plan.apply_at_step, step, end_seconds, clock};
    return;
  }
  const int64_t steps = step - plan_start_->step;
  if (steps < kMinPlanMeasuredSteps || steps > kPlanMeasuredSteps ||
      !(end_seconds > plan_start_->end_seconds)) {
    return;
  }
  plan.measured_step_seconds =
      (end_seconds - plan_start_->end_seconds) / static_cast<double>(steps);
  plan.measured_steps = static_cast<int>(steps);
  plan.calibration = plan.predicted_step_seconds / plan.measured_step_seconds;
  if (steps == kPlanMeasuredSteps) LogPlanMeasured();
}

void JobSession::LogPlanMeasured() const {
  const RebalanceSnapshot& plan = last_rebalance_;
  if (!(plan.measured_step_seconds > 0.0)) return;
  const nlohmann::json fields = {{"apply_at_step", plan.apply_at_step},
                                 {"steps", plan.measured_steps},
                                 {"predicted_step_seconds", plan.predicted_step_seconds},
                                 {"measured_step_seconds", plan.measured_step_seconds},
                                 {"calibration", plan.calibration},
                                 {"model_calibration", calibration_}};
  if (plan.calibration < kPoorPlanCalibration) {
    log::Warn("coordinator", config_.name,
              "the plan ran slower than predicted: the workers' costs may depend on each other "
              "(processes sharing one GPU) or change past the sizes they ran; efficiency is the "
              "model's view",
              fields);
  } else {
    log::Info("coordinator", config_.name, "plan measured", fields);
  }
}

std::pair<std::vector<std::string>, double> JobSession::Releasable() const {
  const std::size_t spare = ranks_.size() > static_cast<std::size_t>(config_.min_workers)
                                ? ranks_.size() - static_cast<std::size_t>(config_.min_workers)
                                : 0;
  // Judge only measured workers, after the balancer has had two intervals of this generation to
  // fit them: the job's step says nothing about how long this session has watched them.
  if (spare == 0 || batches_.size() != ranks_.size() ||
      steps_in_generation_ < 2 * static_cast<int64_t>(config_.interval_steps)) {
    return {};
  }
  // Each worker as the balancer plans it, with its measured per-size costs: a worker that the
  // line says cannot help may be fast where it actually runs (issue 25: the line through a
  // slowed worker's big batches put its cost at batch 1 far above what it measured there).
  balancer::PlanRequest request;
  request.global_batch = batch_tuner_.global_batch();
  request.tail_seconds = controller_.TailSeconds();
  // A worker is judged only on what it measured at the batch it runs, since its speed last
  // changed: even if its time fell in proportion to the batch below that size (the most
  // optimistic curve there is), one sample would have to take longer than the others' step.
  // Anything else would release it on an extrapolation.
  std::vector<std::optional<double>> one_sample_at_best;
  for (std::size_t rank = 0; rank < ranks_.size(); ++rank) {
    const std::string& pod = ranks_[rank];
    std::optional<balancer::WorkerSpec> spec = controller_.PlanningSpec(pod);
    const balancer::ComputeTimeModel* model = controller_.Model(pod);
    if (!spec || model == nullptr) return {};
    const int micro_batch = (batches_[rank] + accumulation_steps_ - 1) / accumulation_steps_;
    const std::optional<balancer::SizeRecord> measured = model->sizes().Find(micro_batch);
    one_sample_at_best.push_back(
        measured && controller_.MeasuredInCurrentRegime(pod, micro_batch)
            ? std::optional<double>(measured->typical * model->speed_factor() / micro_batch)
            : std::nullopt);
    spec->min_batch = 0;
    spec->current_batch = 0;
    request.workers.push_back(std::move(*spec));
  }
  Result<balancer::Plan> without_minimum =
      balancer::MakePlan(request, *balancer::MakePolicy(balancer::PolicyKind::kOptimal));
  if (!without_minimum.ok()) return {};
  std::vector<std::string> idle;
  for (std::size_t i = 0; i < without_minimum->workers.size(); ++i) {
    const balancer::WorkerAssignment& worker = without_minimum->workers[i];
    if (worker.batch > 0) continue;
    // The gain below assumes every idle worker goes: all must be judged.
    if (!one_sample_at_best[i] ||
        *one_sample_at_best[i] < without_minimum->step_seconds - request.tail_seconds) {
      return {};
    }
    if (idle.size() < spare) idle.push_back(worker.id);
  }
  if (idle.empty()) return {};
  const double current = balancer::PredictStepSeconds(request, batches_, accumulation_steps_);
  const double gain = current > 0.0 ? 1.0 - without_minimum->step_seconds / current : 0.0;
  if (gain < config_.min_gain) return {};
  return {idle, gain};
}

JobSessionSnapshot JobSession::Snapshot() const {
  JobSessionSnapshot snapshot;
  snapshot.name = config_.name;
  snapshot.policy = std::string(balancer::ToString(config_.policy));
  snapshot.global_batch = batch_tuner_.global_batch();
  snapshot.batching_mode = batch_tuner_.adaptive() ? "adaptive" : "fixed";
  snapshot.learning_rate = batch_tuner_.learning_rate();
  if (const std::optional<balancer::GradientNoiseEstimate> noise = batch_tuner_.Estimate()) {
    snapshot.gradient_noise_scale = noise->noise_scale;
  }
  snapshot.global_batch_changes.assign(batch_tuner_.changes().begin(),
                                       batch_tuner_.changes().end());
  snapshot.membership_generation = membership_generation_;
  snapshot.generation_reason = generation_reason_;
  snapshot.generation_step = generation_step_;
  snapshot.step = completed_step_;
  snapshot.plan = batches_;
  snapshot.plan_changes = controller_.plan_changes();
  snapshot.last_rebalance = last_rebalance_;
  snapshot.last_evaluation = last_evaluation_;
  snapshot.training_loss = training_loss_;
  snapshot.measured_samples_per_second = samples_per_second_average_;

  for (const auto& [pod, member] : members_) {
    MemberSnapshot view;
    view.pod = pod;
    view.node = member.hello.node();
    view.gpu_product = member.hello.gpu_product();
    view.connected = member.connected;
    view.rank = member.rank;
    if (member.rank >= 0 && static_cast<std::size_t>(member.rank) < batches_.size()) {
      view.local_batch = batches_[static_cast<std::size_t>(member.rank)];
    }
    if (member.last_report) {
      view.last_step = member.last_report->step();
      view.compute_seconds = member.last_report->compute_seconds();
      view.step_seconds = member.last_report->step_seconds();
      view.data_wait_seconds = member.last_report->data_wait_seconds();
      view.data_wait_fraction = member.data_wait_fraction;
      if (view.compute_seconds > 0.0) {
        view.samples_per_second = member.last_report->local_batch() / view.compute_seconds;
      }
    }
    if (const std::optional<balancer::LinearCost> cost = controller_.FittedCost(pod)) {
      view.fitted_fixed_seconds = cost->fixed_seconds;
      view.fitted_seconds_per_sample = cost->seconds_per_sample;
    }
    snapshot.members.push_back(std::move(view));
  }
  const auto [releasable, gain] = Releasable();
  for (MemberSnapshot& member : snapshot.members) {
    member.releasable =
        std::find(releasable.begin(), releasable.end(), member.pod) != releasable.end();
  }
  snapshot.release_gain = gain;
  snapshot.formation_error = formation_error_;
  snapshot.formation_failures = formation_failures_;
  snapshot.ideal_samples_per_second = ideal_samples_per_second_;
  snapshot.efficiency = efficiency_;
  snapshot.model_calibration = calibration_;
  return snapshot;
}

}  // namespace fulcrum::coordinator
