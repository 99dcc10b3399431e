#include "bench/sim/cluster_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "operator/balancer/controller.h"
#include "operator/balancer/measures.h"
#include "operator/balancer/optimal_policy.h"
#include "operator/balancer/planner.h"

namespace fulcrum::sim {
namespace {

constexpr double kBytesPerGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMemoryHeadroom = 0.9;  // the same headroom the balancer keeps

struct SimulatedWorker {
  std::string id;
  const GpuProfile* profile;
  double slowdown = 1.0;
  int64_t joined_at = 0;  // the step it joined (Noise::startup_seconds fades from there)
};

class Simulation {
 public:
  Simulation(const Scenario& scenario, balancer::Controller controller)
      : scenario_(scenario), controller_(std::move(controller)), random_(scenario.seed) {}

  Status Join(const WorkerGroup& group, int64_t step = 0) {
    const GpuProfile& profile = scenario_.profiles.at(group.profile);
    for (int i = 0; i < group.count; ++i) {
      SimulatedWorker worker{"w" + std::to_string(next_worker_++), &profile, 1.0, step};
      balancer::WorkerInfo info{worker.id, profile.product,
                                static_cast<int64_t>(profile.memory_gib * kBytesPerGiB)};
      if (Status status = controller_.AddWorker(info); !status.ok()) return status;
      workers_.push_back(std::move(worker));
    }
    ideal_step_seconds_.reset();
    return Ok();
  }

  Status Apply(const Event& event) {
    if (event.kind == EventKind::kJoin) return Join(event.joiners, event.step);
    const int index = IndexOf(event.worker);
    if (index < 0) {
      return InvalidArgument("events.worker", "no worker \"" + event.worker + "\" at step " +
                                                  std::to_string(event.step));
    }
    ideal_step_seconds_.reset();
    if (event.kind == EventKind::kSlowdown) {
      workers_[index].slowdown = event.factor;
      return Ok();
    }
    workers_.erase(workers_.begin() + index);
    return controller_.RemoveWorker(event.worker);
  }

  // The index of worker `id` in the batches, or -1.
  int IndexOf(const std::string& id) const {
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i].id == id) return static_cast<int>(i);
    }
    return -1;
  }

  // Runs one step; returns its balance efficiency η.
  Result<double> Step(int64_t step, PolicyRun& run) {
    // Without a lead the decision is made for this step; with one, this step runs what was
    // decided `lead` steps ago (the first plan at once), and its decision is for step + lead.
    const int lead = scenario_.apply_lead_steps;
    bool plan_changed = false;
    if (lead == 0 || running_.batches.empty()) {
      Result<balancer::StepDecision> decision = controller_.Decide(step);
      if (!decision.ok()) return decision.error();
      running_ = *decision;
      plan_changed = decision->plan_changed;
      if (plan_changed) run.plan_reasons.emplace_back(step, controller_.plan().reason);
    }
    while (!scheduled_.empty() && scheduled_.begin()->first <= step) {
      running_ = scheduled_.begin()->second;
      scheduled_.erase(scheduled_.begin());
    }
    const balancer::StepDecision& running = running_;
    const int accumulation = running.accumulation_steps;
    run.batches_per_step.push_back(running.batches);
    Result<double> ideal = IdealStepSeconds();
    if (!ideal.ok()) return ideal.error();
    const std::vector<double> jitter = DrawJitter();
    std::vector<double> compute = TrueComputeSeconds(running.batches, accumulation, jitter);
    AddContention(running.batches, compute);
    AddStartUp(step, running.batches, compute);
    bool out_of_memory = false;
    bool pathological = false;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const GpuProfile& p = *workers_[i].profile;
      const int batch = running.batches[i];
      out_of_memory = out_of_memory ||
                      (batch > 0 && PeakGiB(p, MicroBatch(batch, accumulation)) > p.memory_gib);
      pathological =
          pathological || (batch > 0 && Pathological(p, MicroBatch(batch, accumulation)));
    }
    if (pathological) {
      ++run.pathological_steps;
      run.last_pathological_step = step;
    }
    const double slowest = *std::max_element(compute.begin(), compute.end());
    const double step_seconds = slowest + scenario_.tail_seconds;
    // What the balancer controls: the split's step time under the mean costs (no jitter or
    // contention draw), against the same bound.
    const std::vector<double> mean_compute = TrueComputeSeconds(
        running.batches, accumulation, std::vector<double>(workers_.size(), 1.0));
    run.split_efficiency_per_step.push_back(
        *ideal / (*std::max_element(mean_compute.begin(), mean_compute.end()) +
                  scenario_.tail_seconds + ExpectedContentionSeconds()));
    if (Status status = Report(step, running, compute, slowest); !status.ok())
      return status.error();
    if (lead > 0) {
      Result<balancer::StepDecision> decision = controller_.Decide(step + lead);
      if (!decision.ok()) return decision.error();
      plan_changed = plan_changed || decision->plan_changed;
      if (decision->plan_changed) run.plan_reasons.emplace_back(step, controller_.plan().reason);
      scheduled_[step + lead] = std::move(*decision);
    }
    run.plan_changed_per_step.push_back(plan_changed);

    const std::vector<double> oracle =
        TrueComputeSeconds(oracle_batches_, oracle_accumulation_, jitter);
    total_oracle_seconds_ +=
        *std::max_element(oracle.begin(), oracle.end()) + scenario_.tail_seconds;
    run.out_of_memory_steps += out_of_memory ? 1 : 0;
    total_samples_ += out_of_memory ? 0 : scenario_.global_batch;
    total_seconds_ += step_seconds;
    total_ideal_seconds_ += *ideal;
    idle_sum_ += balancer::IdleFraction(compute);
    ++steps_;
    return out_of_memory ? 0.0 : *ideal / step_seconds;
  }

  void Finish(PolicyRun& run) const {
    run.samples_per_second = total_samples_ / total_seconds_;
    run.ideal_samples_per_second = steps_ * double(scenario_.global_batch) / total_ideal_seconds_;
    run.efficiency = run.samples_per_second / run.ideal_samples_per_second;
    run.oracle_efficiency = total_ideal_seconds_ / total_oracle_seconds_;
    run.idle_fraction = idle_sum_ / steps_;
    run.plan_changes = controller_.plan_changes();
  }

 private:
  // A micro-batch that takes more than 10% longer (beyond timing noise) than the minimum
  // efficient batch, which is bigger: c(b) / c(m) = 2 - b/m > 1.1.
  static bool Pathological(const GpuProfile& p, int micro_batch) {
    const double m = p.min_efficient_batch;
    return m > 0 && micro_batch < m && 2.0 - micro_batch / m > 1.1;
  }

  static int MicroBatch(int batch, int accumulation) {
    return (batch + accumulation - 1) / accumulation;
  }
  static double PeakGiB(const GpuProfile& p, int micro_batch) {
    return p.memory_base_gib + p.memory_per_sample_gib * micro_batch;
  }

  // Per-worker multipliers of this step's true compute time; no draws without jitter, so the
  // report noise stays the same sequence as before jitter existed.
  std::vector<double> DrawJitter() {
    std::vector<double> jitter(workers_.size(), 1.0);
    if (scenario_.noise.jitter <= 0.0) return jitter;
    std::normal_distribution<double> unit(0.0, 1.0);
    for (double& factor : jitter)
      factor = std::max(0.05, 1.0 + scenario_.noise.jitter * unit(random_));
    return jitter;
  }

  // The wait for a shared core or bus, added to every working worker's compute and never
  // scaled by a slowdown; no draws without it, so other scenarios keep their noise sequence.
  void AddContention(const std::vector<int>& batches, std::vector<double>& compute) {
    if (scenario_.noise.contention_seconds <= 0.0) return;
    std::exponential_distribution<double> wait(1.0 / scenario_.noise.contention_seconds);
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (batches[i] > 0) compute[i] += wait(random_);
    }
  }

  // A worker's start-up wait (Noise::startup_seconds), fading linearly over its first
  // startup_steps; no draws, so other scenarios keep their noise sequence.
  void AddStartUp(int64_t step, const std::vector<int>& batches,
                  std::vector<double>& compute) const {
    const Noise& noise = scenario_.noise;
    if (noise.startup_seconds <= 0.0 || noise.startup_steps <= 0) return;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const int64_t since = step - workers_[i].joined_at;
      if (batches[i] > 0 && since < noise.startup_steps) {
        compute[i] += noise.startup_seconds *
                      (1.0 - static_cast<double>(since) / static_cast<double>(noise.startup_steps));
      }
    }
  }

  // Every step waits for the longest of the workers' contention draws, whatever the split: the
  // bound carries its mean (the largest of n exponentials averages the mean of one times the
  // n-th harmonic number) instead of pretending a balancer could avoid it.
  double ExpectedContentionSeconds() const {
    double harmonic = 0.0;
    for (std::size_t n = 1; n <= workers_.size(); ++n) harmonic += 1.0 / static_cast<double>(n);
    return scenario_.noise.contention_seconds * harmonic;
  }

  // True compute seconds of `batches` (worker order) this step, jitter and slowdowns included.
  std::vector<double> TrueComputeSeconds(const std::vector<int>& batches, int accumulation,
                                         const std::vector<double>& jitter) const {
    std::vector<double> compute(workers_.size(), 0.0);
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (batches[i] == 0) continue;
      const GpuProfile& p = *workers_[i].profile;
      const int micro_batch = MicroBatch(batches[i], accumulation);
      if (p.min_efficient_batch > 0 && micro_batch < p.min_efficient_batch) {
        const double m = p.min_efficient_batch;
        compute[i] = jitter[i] * workers_[i].slowdown * accumulation *
                     (p.fixed_seconds + p.seconds_per_sample * m) * (2.0 - micro_batch / m);
        continue;
      }
      compute[i] = jitter[i] * workers_[i].slowdown *
                   (accumulation * p.fixed_seconds + p.seconds_per_sample * batches[i]);
    }
    ShareDevice(compute);
    return compute;
  }

  // Noise::shared_device: each worker is slowed by the time the others compute alongside it,
  // which depends on their slowed times in turn; a few fixed-point rounds settle it (each
  // worker's factor stays within [1, 1 + shared_device·(n − 1)]).
  void ShareDevice(std::vector<double>& compute) const {
    const double coupling = scenario_.noise.shared_device;
    if (coupling <= 0.0) return;
    const std::vector<double> alone = compute;
    for (int round = 0; round < 8; ++round) {
      std::vector<double> next = alone;
      for (std::size_t i = 0; i < compute.size(); ++i) {
        if (alone[i] <= 0.0) continue;
        double overlap = 0.0;
        for (std::size_t j = 0; j < compute.size(); ++j) {
          if (j != i) overlap += std::min(compute[j], compute[i]);
        }
        next[i] = alone[i] + coupling * overlap * alone[i] / compute[i];
      }
      compute = std::move(next);
    }
  }

  // What the trainers report: noisy compute, comm = wait for the straggler + noisy tail.
  Status Report(int64_t step, const balancer::StepDecision& decision,
                const std::vector<double>& compute, double slowest) {
    std::normal_distribution<double> unit(0.0, 1.0);
    std::uniform_real_distribution<double> chance(0.0, 1.0);
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const GpuProfile& p = *workers_[i].profile;
      const int batch = decision.batches[i];
      balancer::StepReport report;
      report.worker_id = workers_[i].id;
      report.step = step;
      report.local_batch = batch;
      report.accumulation_steps = decision.accumulation_steps;
      const int micro_batch = MicroBatch(batch, decision.accumulation_steps);
      report.out_of_memory = batch > 0 && PeakGiB(p, micro_batch) > p.memory_gib;
      double measured = compute[i] * std::max(0.05, 1.0 + scenario_.noise.compute * unit(random_));
      if (chance(random_) < scenario_.noise.outlier_probability) {
        measured *= scenario_.noise.outlier_factor;
      }
      report.compute_seconds = batch > 0 ? measured : 0.0;
      const double tail =
          scenario_.tail_seconds * std::max(0.0, 1.0 + scenario_.noise.comm * unit(random_));
      report.comm_seconds = slowest - compute[i] + tail;
      if (batch > 0 && p.memory_per_sample_gib > 0.0) {
        report.peak_memory_bytes = static_cast<int64_t>(PeakGiB(p, micro_batch) * kBytesPerGiB);
      }
      if (Status status = controller_.Observe(report); !status.ok()) return status;
    }
    return Ok();
  }

  // X_UB's step time: the exact optimum for the true costs and true memory caps.
  Result<double> IdealStepSeconds() {
    if (ideal_step_seconds_) return *ideal_step_seconds_;
    balancer::PlanRequest truth;
    truth.global_batch = scenario_.global_batch;
    truth.tail_seconds = scenario_.tail_seconds + ExpectedContentionSeconds();
    // On a shared device a split whose workers all finish together slows each of them by the
    // same 1 + shared_device·(n − 1) (ShareDevice), so the optimum is the separate devices'
    // optimum at those costs.
    const double shared =
        1.0 + scenario_.noise.shared_device * (static_cast<double>(workers_.size()) - 1.0);
    for (const SimulatedWorker& worker : workers_) {
      const GpuProfile& p = *worker.profile;
      int cap = scenario_.global_batch;
      if (p.memory_per_sample_gib > 0.0) {
        const double fits =
            (kMemoryHeadroom * p.memory_gib - p.memory_base_gib) / p.memory_per_sample_gib;
        cap = static_cast<int>(std::clamp(std::floor(fits), 1.0, double(cap)));
      }
      truth.workers.push_back({worker.id, p.fixed_seconds * worker.slowdown * shared,
                               p.seconds_per_sample * worker.slowdown * shared, 1, cap, 0});
    }
    Result<balancer::Plan> best = balancer::MakePlan(truth, balancer::OptimalPolicy());
    if (!best.ok()) return best.error();
    ideal_step_seconds_ = best->ideal_step_seconds;
    oracle_batches_.clear();
    for (const balancer::WorkerAssignment& assignment : best->workers) {
      oracle_batches_.push_back(assignment.batch);
    }
    oracle_accumulation_ = best->accumulation_steps;
    return *ideal_step_seconds_;
  }

  const Scenario& scenario_;
  balancer::Controller controller_;
  std::mt19937_64 random_;
  std::vector<SimulatedWorker> workers_;
  int next_worker_ = 0;
  std::optional<double> ideal_step_seconds_;
  std::vector<int> oracle_batches_;  // the true-optimal split, refreshed with X_UB
  int oracle_accumulation_ = 1;
  balancer::StepDecision running_;                       // what the workers run now
  std::map<int64_t, balancer::StepDecision> scheduled_;  // apply step -> decision (lead > 0)
  double total_oracle_seconds_ = 0.0;
  double total_samples_ = 0.0;
  double total_seconds_ = 0.0;
  double total_ideal_seconds_ = 0.0;
  double idle_sum_ = 0.0;
  int64_t steps_ = 0;
};

std::string Describe(const Event& event) {
  switch (event.kind) {
    case EventKind::kSlowdown:
      return event.worker + " slows down x" + std::to_string(event.factor).substr(0, 4);
    case EventKind::kLeave:
      return event.worker + " leaves";
    case EventKind::kJoin:
      return std::to_string(event.joiners.count) + " x " + event.joiners.profile + " join";
  }
  return "event";
}

// Steps from `from` until the split's η stays >= kRecoveredEfficiency up to `until`; nullopt
// if it is still below at the end of the window.
std::optional<int64_t> ReactionSteps(const std::vector<double>& split_efficiency, int64_t from,
                                     int64_t until) {
  int64_t last_below = -1;
  for (int64_t step = from; step < until; ++step) {
    if (split_efficiency[step] < kRecoveredEfficiency) last_below = step;
  }
  if (last_below < 0) return 0;
  if (last_below == until - 1) return std::nullopt;
  return last_below - from + 1;
}

}  // namespace

Result<PolicyRun> RunScenario(const Scenario& scenario, balancer::PolicyKind policy) {
  balancer::ControllerConfig config;
  config.global_batch = scenario.global_batch;
  config.policy = policy;
  config.interval_steps = scenario.interval_steps;
  config.min_gain = scenario.min_gain;
  if (scenario.gain_noise_sigmas) config.gain_noise_sigmas = *scenario.gain_noise_sigmas;
  config.slowdown_evidence_to_plan =
      scenario.slowdown_evidence_to_plan.value_or(config.slowdown_evidence_to_plan);
  config.speed_evidence_to_plan =
      scenario.speed_evidence_to_plan.value_or(config.speed_evidence_to_plan);
  if (scenario.support_sigmas) config.fitter.support_sigmas = *scenario.support_sigmas;
  if (scenario.stale_after_reports) {
    config.fitter.stale_after_reports = *scenario.stale_after_reports;
  }
  config.seed = scenario.seed;
  Result<balancer::Controller> controller = balancer::Controller::Create(config);
  if (!controller.ok()) return controller.error();

  Simulation simulation(scenario, std::move(*controller));
  for (const WorkerGroup& group : scenario.workers) {
    if (Status status = simulation.Join(group); !status.ok()) return status.error();
  }
  PolicyRun run;
  run.policy = policy;
  std::vector<double>& efficiency = run.efficiency_per_step;
  efficiency.reserve(scenario.steps);
  std::size_t next_event = 0;
  // The slowed worker's index for each slowdown event (by event), where it is slowed down.
  std::vector<int> slowed_index(scenario.events.size(), -1);
  for (int64_t step = 0; step < scenario.steps; ++step) {
    for (; next_event < scenario.events.size() && scenario.events[next_event].step == step;
         ++next_event) {
      const Event& event = scenario.events[next_event];
      if (Status status = simulation.Apply(event); !status.ok()) return status.error();
      if (event.kind == EventKind::kSlowdown && event.factor > 1.0) {
        slowed_index[next_event] = simulation.IndexOf(event.worker);
      }
    }
    Result<double> step_efficiency = simulation.Step(step, run);
    if (!step_efficiency.ok()) return step_efficiency.error();
    efficiency.push_back(*step_efficiency);
  }
  simulation.Finish(run);

  std::vector<std::pair<int64_t, std::string>> marks = {{0, "start"}};
  for (const Event& event : scenario.events) marks.emplace_back(event.step, Describe(event));
  for (std::size_t i = 0; i < marks.size(); ++i) {
    int64_t until = scenario.steps;
    for (std::size_t j = i + 1; j < marks.size(); ++j) {
      if (marks[j].first > marks[i].first) {
        until = marks[j].first;
        break;
      }
    }
    EventOutcome outcome{marks[i].first, marks[i].second,
                         ReactionSteps(run.split_efficiency_per_step, marks[i].first, until)};
    for (int64_t step = marks[i].first; step < until; ++step) {
      outcome.plan_changes += run.plan_changed_per_step[step] ? 1 : 0;
    }
    // marks[0] is the start; marks[i] is scenario.events[i - 1].
    const int slowed = i > 0 ? slowed_index[i - 1] : -1;
    for (int64_t step = marks[i].first + 1; slowed >= 0 && step < until; ++step) {
      const std::vector<int>& now = run.batches_per_step[step];
      const std::vector<int>& before = run.batches_per_step[step - 1];
      if (now.size() == before.size() && now[slowed] > before[slowed]) {
        ++outcome.slowed_batch_rises;
      }
    }
    run.events.push_back(std::move(outcome));
  }
  return run;
}

}  // namespace fulcrum::sim
