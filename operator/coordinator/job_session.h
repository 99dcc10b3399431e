// One job's membership, generations and balancing, as a state machine without I/O: the
// gRPC service feeds it trainer messages and clock ticks and sends what it puts in the outbox.
// Not thread-safe; the service serialises calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/token_bucket.h"
#include "fulcrum/v1/coordinator.pb.h"
#include "operator/balancer/controller.h"
#include "operator/coordinator/global_batch_tuner.h"
#include "operator/coordinator/job_session_config.h"
#include "operator/coordinator/job_session_snapshot.h"
#include "operator/coordinator/throughput_window.h"

namespace fulcrum::coordinator {

using Clock = std::chrono::steady_clock;

// The largest step or membership generation any message may claim: far beyond a real job
// (2^50 steps at 1,000 steps/s take 35,000 years) and far below INT64_MAX, so `step + lead`
// and `generation + 1` can never overflow, whatever a token holder sends.
inline constexpr int64_t kMaxProgressCounter = int64_t{1} << 50;
// How far ahead of the generation's steps a report may be. Ranks step together (every step
// ends in a collective), but the coordinator reads each trainer's stream on its own, so on a
// loaded machine one stream is read far ahead of another: an e2e job of 1 ms MLP steps had
// rank 0's step 690 read while the generation's last complete step was 589 (a bound of 100
// failed it as bad input). 10,000 steps is 10 s of such lag at 1 ms a step, and still keeps a
// token holder from filling the per-step bookkeeping without bound.
inline constexpr int64_t kMaxReportStepLead = 10'000;
// Re-formations one pod may force (Rejoin, or a restart under its name): a burst of this many,
// then one per kForcedGenerationRefill. More are not refused but deferred, so a pod that keeps
// asking cannot keep the whole job re-forming process groups instead of training.
inline constexpr int kForcedGenerationBurst = 3;
inline constexpr std::chrono::seconds kForcedGenerationRefill{10};
// After a failed attempt to form a generation, the next waits settle x 2^failures, at most this.
inline constexpr std::chrono::seconds kMaxFormationRetryDelay{30};
// A pod's hang strikes (Member::hang_strikes) fall by one per this long without a new one.
inline constexpr std::chrono::seconds kHangStrikeDecay{60};
// Weight of the newest step in a worker's smoothed data-wait fraction (about the last 10 steps).
inline constexpr double kDataWaitWeight = 0.1;

struct Outgoing {
  std::string pod;
  fulcrum::v1::CoordinatorMessage message;
};
using Outbox = std::vector<Outgoing>;

class JobSession {
 public:
  static Result<JobSession> Create(JobSessionConfig config);

  const JobSessionConfig& config() const { return config_; }
  // How many times membership has changed: the trainers' "generation" (not the custom
  // resource's metadata.generation, which counts spec edits).
  int64_t membership_generation() const { return membership_generation_; }
  // The last step every rank reported (-1 before the first): the service times a report
  // that moves it, since that report ran the plan decision for the step.
  int64_t completed_step() const { return completed_step_; }

  // A live edit of the job: the global batch, worker limits and balancing settings change in
  // place, nobody restarts. A new global batch or policy is planned at the next completed
  // step; a new max_workers re-forms membership only if that changes who trains. The name
  // and token cannot change (kFailedPrecondition).
  Status Reconfigure(JobSessionConfig config, Clock::time_point now);

  // A trainer said Hello (its token is already checked). A pod that reconnects while still
  // remembered gets its current Assignment again; anyone else waits for the next generation.
  // `peer_host`: the address the stream comes from ("" when unknown); a pod's name and its
  // store address cannot be claimed from another host while it is remembered.
  Status Join(const fulcrum::v1::Hello& hello, Clock::time_point now, Outbox& out,
              std::string_view peer_host = {});
  // The trainer's stream closed; it leaves after leave_timeout unless it reconnects.
  void Disconnect(std::string_view pod, Clock::time_point now);
  Status Report(std::string_view pod, const fulcrum::v1::StepReport& report, Clock::time_point now,
                Outbox& out);
  Status Heartbeat(std::string_view pod, const fulcrum::v1::Heartbeat& heartbeat,
                   Clock::time_point now);
  Status Rejoin(std::string_view pod, const fulcrum::v1::Rejoin& rejoin, Clock::time_point now);
  // Rank 0's result of the job's evaluation; kept for status (the newest step wins).
  Status Evaluated(std::string_view pod, const fulcrum::v1::Evaluation& evaluation,
                   Clock::time_point now);
  // Timeouts and pending generations. Returns the pods whose streams must be closed because
  // they stopped sending (heartbeat timeout).
  std::vector<std::string> Tick(Clock::time_point now, Outbox& out);
  void SendControl(fulcrum::v1::Control::Action action, const std::string& reason, Outbox& out);

  JobSessionSnapshot Snapshot() const;

 private:
  struct Member {
    fulcrum::v1::Hello hello;
    std::string peer_host;
    uint64_t join_sequence = 0;
    bool connected = true;
    Clock::time_point last_seen;
    Clock::time_point disconnected_at;
    int rank = -1;  // in the current generation, -1 if not a member of it
    std::optional<fulcrum::v1::StepReport> last_report;
    // The share of its step time this worker waits for its batch, smoothed over recent steps
    // (exponentially, kDataWaitWeight per step): data-bound workers are told apart from slow ones.
    double data_wait_fraction = 0.0;
    // The re-formations this pod forces: full from the start (a full bucket's refill time
    // does not matter), one token per kForcedGenerationRefill.
    TokenBucket forced_generations{
        1.0 / std::chrono::duration<double>(kForcedGenerationRefill).count(),
        kForcedGenerationBurst, Clock::time_point{}};
    Clock::time_point forced_deferred_until;  // a deferred re-formation of its is pending
    // Silent past hang_timeout while its generation's others spoke: left out of generations
    // until it speaks again.
    bool hung = false;
    // Times it was taken for hung and then spoke again (a false alarm: a stall, a loaded
    // node); each doubles the silence it takes to be taken for hung again, so a pod that
    // keeps stalling cannot keep the job re-forming. One is forgiven per kHangStrikeDecay.
    int hang_strikes = 0;
    Clock::time_point last_hang_strike;
  };

  JobSession(JobSessionConfig config, balancer::Controller controller);
  Member* Find(std::string_view pod);
  // Something arrived from `member`: it is alive; a hung one is taken back.
  void Heard(Member& member, Clock::time_point now);
  // Members of the current generation silent past their hang timeout while others of it
  // were heard.
  void FindHungMembers(Clock::time_point now);
  // hang_timeout doubled per strike, at most the heartbeat timeout.
  Clock::duration HangTimeoutOf(Member& member, Clock::time_point now) const;
  void ScheduleGeneration(Clock::time_point now, std::string reason, bool force);
  // A re-formation `member` asks for: at once while its bucket has tokens, later otherwise.
  void ScheduleForcedGeneration(Member& member, Clock::time_point now, std::string reason);
  void FormGeneration(Clock::time_point now, Outbox& out);
  void RetryFormation(Clock::time_point now, const std::string& reason, const Error& error);
  Status CheckReportClaims(const Member& member, const fulcrum::v1::StepReport& report) const;
  Status SyncControllerMembers(const std::vector<std::string>& pods);
  void OnStepComplete(int64_t step, Outbox& out);
  Status DecidePlan(int64_t step, std::string* reason);
  void SendAssignments(int64_t apply_at_step, const std::string& reason, Outbox& out);
  // The last plan's measured step time and calibration from the steps that ran it (`step` ended
  // at `end_seconds` on rank 0's `clock`), and its log line.
  void MeasureLastPlan(int64_t step, double end_seconds, const std::string& clock);
  void LogPlanMeasured() const;
  // Balance efficiency, the model's calibration and the ideal rate (MeasureBalance in .cc).
  void MeasureBalance();
  // Members the best split with no minimum batch leaves idle, if going on without them saves
  // at least min_gain of the step time and leaves min_workers; and that saving. Judged on
  // measured per-size costs, and only for members whose small batch was measured in their
  // current speed regime (never on the line's extrapolation down to batch 1).
  std::pair<std::vector<std::string>, double> Releasable() const;
  Status CheckReportGeneration(int64_t generation) const;

  JobSessionConfig config_;
  balancer::Controller controller_;
  std::map<std::string, Member, std::less<>> members_;
  uint64_t next_join_sequence_ = 0;

  int64_t membership_generation_ = 0;
  std::vector<std::string> ranks_;  // pods by rank
  // The current generation dropped a member of the previous one that did not leave in band:
  // its Assignments tell trainers still in a collective of the old one to abandon it.
  bool abandon_previous_ = false;
  std::vector<int> batches_;  // the last plan sent, by rank
  // The plans sent in this generation, by rank: the first and the latest kKeptPlans. Rank 0
  // picks each step's plan from those it has received, so a report's local batch must be one
  // of them.
  std::vector<std::vector<int>> sent_plans_;
  int accumulation_steps_ = 1;
  std::vector<std::string> controller_members_;

  bool waiting_for_min_workers_ = true;
  std::optional<Clock::time_point> pending_since_;
  std::string pending_reason_;
  bool pending_force_ = false;
  // No generation forms before this (deferred forced re-formations, failed attempts).
  Clock::time_point not_before_{};
  int generations_formed_ = 0;  // by this session (a restarted one starts at 0)
  // Why the last attempt to form a generation failed ("" once one formed), and how many
  // attempts in a row failed.
  std::string formation_error_;
  int formation_failures_ = 0;
  // The last generation that formed: why, and the step its plan applies from.
  std::string generation_reason_;
  int64_t generation_step_ = -1;
  // The furthest step a joining trainer's state was at (Hello.step): the first plan of a
  // restarted coordinator, which has heard no step yet, applies there, not at step 0.
  int64_t hello_step_ = 0;
  EvaluationSnapshot last_evaluation_;
  bool recipe_pending_ = false;  // a live recipe edit not yet sent to the trainers
  double training_loss_ = std::numeric_limits<double>::quiet_NaN();

  std::map<int64_t, std::set<std::string>> reporters_by_step_;
  int64_t completed_step_ = -1;
  std::optional<int64_t> completed_step_in_generation_;
  // Steps completed since the current membership generation formed: its members' fits start
  // there (a new leader's session starts with trainers far into the job).
  int64_t steps_in_generation_ = 0;
  int64_t last_decided_step_ = 0;
  // The highest apply step of an Assignment sent in this generation: later ones apply no earlier.
  int64_t last_sent_apply_step_ = 0;
  // Per step not yet completed: samples reported, and rank 0's end time (step_end_seconds).
  std::map<int64_t, int> samples_by_step_;
  std::map<int64_t, double> end_by_step_;
  ThroughputWindow throughput_;
  double step_seconds_average_ = 0.0;        // wall time per step
  double samples_per_second_average_ = 0.0;  // measured, on one clock when trainers send it
  double ideal_samples_per_second_ = 0.0;
  double efficiency_ = 0.0;   // η = T(best) / T(current), <= 1
  double calibration_ = 0.0;  // T_model(current) / T_measured
  RebalanceSnapshot last_rebalance_;
  // Where the last plan's measurement starts: the first step ended at or after the one before
  // the plan's first, on `clock` (MeasureLastPlan).
  struct PlanStart {
    int64_t apply_at_step = 0;
    int64_t step = 0;
    double end_seconds = 0.0;
    std::string clock;
  };
  std::optional<PlanStart> plan_start_;
  // The running global batch and learning rate, and the gradient noise estimate (spec.batching).
  GlobalBatchTuner batch_tuner_;
};

}  // namespace fulcrum::coordinator
