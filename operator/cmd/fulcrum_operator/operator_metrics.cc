#include "operator/cmd/fulcrum_operator/operator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

namespace fulcrum::operator_main {
namespace {

using coordinator::JobSessionSnapshot;
using coordinator::MemberSnapshot;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Exported at 0 from the start, so a dashboard shows "no failed jobs" rather than no data.
constexpr std::array<const char*, 6> kKnownPhases = {"Pending",   "Running",   "Rebalancing",
                                                     "Suspended", "Succeeded", "Failed"};

// 1 ms .. 10 s: a reconcile is a few API calls; one that takes seconds is worth seeing.
Histogram::BucketBoundaries ReconcileBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// The reconcile buckets and a minute more: keys wait behind slow reconciles of other jobs when
// the workers are all busy, which is what this histogram is for.
Histogram::BucketBoundaries QueueLatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// 50 µs .. 1 s: a decision is tens of microseconds when nothing waits; milliseconds mean
// trainers' reports queue behind other work (docs/benchmarks.md, "Coordinator under load").
Histogram::BucketBoundaries StepDecisionBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1};
}

struct JobGaugeSpec {
  const char* name;
  const char* help;
  double (*value)(const JobSessionSnapshot&);
};

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

const std::array<JobGaugeSpec, 15> kJobGauges = {{
    {"fulcrum_job_global_batch",
     "The global batch the trainers run with (spec.batching adaptive moves it)",
     [](const JobSessionSnapshot& s) { return static_cast<double>(s.global_batch); }},
    {"fulcrum_job_gradient_noise_scale",
     "Gradient noise scale B_noise = tr(Sigma) / |G|^2 from the trainers' gradient statistics "
     "(NaN: not estimated yet)",
     [](const JobSessionSnapshot& s) {
       return s.gradient_noise_scale > 0.0 ? s.gradient_noise_scale : kNone;
     }},
    {"fulcrum_job_learning_rate",
     "The learning rate the coordinator gives the trainers (NaN: their own flags)",
     [](const JobSessionSnapshot& s) { return s.learning_rate > 0.0 ? s.learning_rate : kNone; }},
    {"fulcrum_job_samples_per_second",
     "Measured throughput: committed samples over the wall time between recent step end times "
     "on one clock",
     [](const JobSessionSnapshot& s) { return s.measured_samples_per_second; }},
    {"fulcrum_job_ideal_samples_per_second",
     "Throughput of the best split under the balancer's step-time model rescaled to the "
     "measured period (samples_per_second / efficiency)",
     [](const JobSessionSnapshot& s) { return s.ideal_samples_per_second; }},
    {"fulcrum_job_efficiency",
     "Balance efficiency: best split's step time over the current split's under one model (0..1)",
     [](const JobSessionSnapshot& s) { return s.efficiency; }},
    {"fulcrum_job_model_calibration",
     "The step-time model's step time for the current split over the measured one (1: exact)",
     [](const JobSessionSnapshot& s) { return s.model_calibration; }},
    {"fulcrum_job_plan_calibration",
     "The last plan's predicted step time over the step time measured once it ran: how well the "
     "model predicted a split it had not run (NaN: not measured yet)",
     [](const JobSessionSnapshot& s) {
       return s.last_rebalance.calibration > 0.0 ? s.last_rebalance.calibration : kNone;
     }},
    {"fulcrum_job_step", "Last optimizer step every worker reported (-1: none yet)",
     [](const JobSessionSnapshot& s) { return static_cast<double>(s.step); }},
    {"fulcrum_job_membership_generation",
     "The trainers' membership generation (not the object's metadata.generation)",
     [](const JobSessionSnapshot& s) { return static_cast<double>(s.membership_generation); }},
    {"fulcrum_job_workers", "Workers holding a rank (spares waiting for one are not counted)",
     [](const JobSessionSnapshot& s) {
       double ranked = 0;
       for (const MemberSnapshot& member : s.members) ranked += member.rank >= 0 ? 1 : 0;
       return ranked;
     }},
    {"fulcrum_job_training_loss", "Mean training loss of the last step over the global batch",
     [](const JobSessionSnapshot& s) { return s.training_loss; }},
    {"fulcrum_job_eval_loss", "Mean loss over the evaluation set at the last evaluation",
     [](const JobSessionSnapshot& s) {
       return s.last_evaluation.step >= 0 ? s.last_evaluation.loss : kNone;
     }},
    {"fulcrum_job_eval_accuracy",
     "Top-1 accuracy over the evaluation set at the last evaluation (NaN: none, or no class "
     "label)",
     [](const JobSessionSnapshot& s) { return s.last_evaluation.accuracy.value_or(kNone); }},
    {"fulcrum_job_eval_step", "Step of the last evaluation (NaN: none yet)",
     [](const JobSessionSnapshot& s) {
       return s.last_evaluation.step >= 0 ? static_cast<double>(s.last_evaluation.step) : kNone;
     }},
}};

struct WorkerGaugeSpec {
  const char* name;
  const char* help;
  double (*value)(const MemberSnapshot&);
};

const std::array<WorkerGaugeSpec, 4> kWorkerGauges = {{
    {"fulcrum_worker_local_batch", "The worker's share of the global batch",
     [](const MemberSnapshot& m) { return static_cast<double>(m.local_batch); }},
    {"fulcrum_worker_step_seconds", "Wall time of the worker's last reported step",
     [](const MemberSnapshot& m) { return m.step_seconds; }},
    // Step minus compute is the all-reduce and the wait for slower workers: the dashboard's
    // compute against communication panel.
    {"fulcrum_worker_compute_seconds",
     "Forward and backward time of the worker's last reported step (the rest of the step is "
     "all-reduce and waiting)",
     [](const MemberSnapshot& m) { return m.compute_seconds; }},
    {"fulcrum_worker_samples_per_second",
     "The worker's local batch over the compute time of its last step",
     [](const MemberSnapshot& m) { return m.samples_per_second; }},
}};

struct WorkerSeries {
  std::string gpu_product;  // a label: a change means a new series
  std::array<Gauge*, kWorkerGauges.size()> gauges{};
};

struct JobSeries {
  std::array<Gauge*, kJobGauges.size()> gauges{};
  Gauge* worker_failures = nullptr;
  std::string phase;
  Gauge* phase_gauge = nullptr;                 // null while the phase is unknown
  std::map<std::string, WorkerSeries> workers;  // by pod
  std::map<std::string, Counter*> rebalances;   // by reason kind
  int plan_changes = 0;                         // as of the last update
};

std::vector<std::string_view> SplitReasons(std::string_view reason) {
  std::vector<std::string_view> parts;
  constexpr std::string_view kSeparator = "; ";
  while (true) {
    const std::size_t end = reason.find(kSeparator);
    parts.push_back(reason.substr(0, end));
    if (end == std::string_view::npos) return parts;
    reason.remove_prefix(end + kSeparator.size());
  }
}

bool Contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

using Matcher = bool (*)(std::string_view);
// In order of precedence: what forced a plan before what merely improved one.
constexpr std::array<std::pair<const char*, Matcher>, 6> kRebalanceKinds = {{
    {"membership",
     [](std::string_view p) { return Contains(p, "joined:") || Contains(p, "left:"); }},
    {"memory",
     [](std::string_view p) { return Contains(p, "out of memory") || Contains(p, "memory cap"); }},
    {"global_batch", [](std::string_view p) { return Contains(p, "global batch"); }},
    {"speed", [](std::string_view p) { return p.starts_with("predicted step time"); }},
    {"refinement", [](std::string_view p) { return p.starts_with("refinement"); }},
    {"initial", [](std::string_view p) { return p.starts_with("first plan"); }},
}};
constexpr const char* kOtherRebalanceKind = "other";

}  // namespace

std::string RebalanceReasonKind(std::string_view reason) {
  const std::vector<std::string_view> parts = SplitReasons(reason);
  for (const auto& [kind, matches] : kRebalanceKinds) {
    for (std::string_view part : parts) {
      if (matches(part)) return kind;
    }
  }
  return kOtherRebalanceKind;
}

struct OperatorMetrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  Histogram* reconcile_duration = nullptr;
  Counter* reconcile_errors = nullptr;
  Gauge* queue_depth = nullptr;
  Gauge* leader = nullptr;
  Histogram* queue_latency = nullptr;
  Histogram* step_decision = nullptr;
  Family<Gauge>* worker_failures = nullptr;
  Family<Gauge>* job_phase = nullptr;
  Family<Gauge>* jobs_by_phase = nullptr;
  Family<Counter>* rebalances = nullptr;
  std::array<Family<Gauge>*, kJobGauges.size()> job_families{};
  std::array<Family<Gauge>*, kWorkerGauges.size()> worker_families{};

  std::mutex mutex;  // guards the maps below; prometheus-cpp guards the metrics themselves
  std::map<std::string, Gauge*> phases;
  std::map<std::pair<std::string, std::string>, JobSeries> jobs;  // by (namespace, name)

  void RemoveSeries(const JobSeries& series);  // every series of one job
  void RemoveWorker(const WorkerSeries& worker) {
    for (std::size_t i = 0; i < worker.gauges.size(); ++i) {
      worker_families[i]->Remove(worker.gauges[i]);
    }
  }
};

OperatorMetrics::OperatorMetrics() : impl_(std::make_unique<Impl>()) {
  prometheus::Registry& registry = *impl_->registry;
  auto gauge_family = [&](const char* name, const char* help) {
    return &prometheus::BuildGauge().Name(name).Help(help).Register(registry);
  };
  impl_->reconcile_duration = &prometheus::BuildHistogram()
                                   .Name("fulcrum_operator_reconcile_duration_seconds")
                                   .Help("Time one reconcile of a job took")
                                   .Register(registry)
                                   .Add({}, ReconcileBuckets());
  impl_->reconcile_errors = &prometheus::BuildCounter()
                                 .Name("fulcrum_operator_reconcile_errors_total")
                                 .Help("Reconciles that ended in an error (and were requeued)")
                                 .Register(registry)
                                 .Add({});
  impl_->queue_depth =
      &gauge_family("fulcrum_operator_workqueue_depth", "Job keys waiting in the work queue")
           ->Add({});
  impl_->queue_latency =
      &prometheus::BuildHistogram()
           .Name("fulcrum_operator_workqueue_latency_seconds")
           .Help("Time a job key waited in the work queue before a worker took it")
           .Register(registry)
           .Add({}, QueueLatencyBuckets());
  impl_->step_decision =
      &prometheus::BuildHistogram()
           .Name("fulcrum_coordinator_step_decision_seconds")
           .Help(
               "Time from the last report of a training step to the coordinator's plan "
               "decision for it, lock waits included")
           .Register(registry)
           .Add({}, StepDecisionBuckets());
  impl_->leader = &gauge_family("fulcrum_operator_leader",
                                "1 while this replica holds the Lease, reconciles and serves "
                                "the coordinator; 0 while it stands by")
                       ->Add({});
  impl_->worker_failures =
      gauge_family("fulcrum_job_worker_failures",
                   "Worker failures recorded in the job's status.workerFailures (only grows)");
  impl_->job_phase = gauge_family("fulcrum_job_phase",
                                  "1, labelled with the job's status.phase (one series per job)");
  impl_->jobs_by_phase = gauge_family("fulcrum_operator_jobs", "FulcrumJobs by status phase");
  impl_->rebalances = &prometheus::BuildCounter()
                           .Name("fulcrum_operator_rebalances_total")
                           .Help("New batch plans the coordinator adopted, by kind of reason")
                           .Register(registry);
  for (std::size_t i = 0; i < kJobGauges.size(); ++i) {
    impl_->job_families[i] = gauge_family(kJobGauges[i].name, kJobGauges[i].help);
  }
  for (std::size_t i = 0; i < kWorkerGauges.size(); ++i) {
    impl_->worker_families[i] = gauge_family(kWorkerGauges[i].name, kWorkerGauges[i].help);
  }
  for (const char* phase : kKnownPhases) {
    impl_->phases[phase] = &impl_->jobs_by_phase->Add({{"phase", phase}});
  }
}

OperatorMetrics::~OperatorMetrics() = default;

std::shared_ptr<prometheus::Registry> OperatorMetrics::registry() const {
  return impl_->registry;
}

void OperatorMetrics::ObserveReconcile(double seconds, bool error) {
  impl_->reconcile_duration->Observe(seconds);
  if (error) impl_->reconcile_errors->Increment();
}

void OperatorMetrics::SetLeader(bool leading) {
  impl_->leader->Set(leading ? 1 : 0);
}

void OperatorMetrics::SetQueueDepth(std::size_t depth) {
  impl_->queue_depth->Set(static_cast<double>(depth));
}

void OperatorMetrics::ObserveQueueLatency(double seconds) {
  impl_->queue_latency->Observe(seconds);
}

void OperatorMetrics::ObserveStepDecision(double seconds) {
  impl_->step_decision->Observe(seconds);
}

void OperatorMetrics::SetJobsByPhase(const std::map<std::string, int>& counts) {
  std::lock_guard lock(impl_->mutex);
  for (auto& [phase, gauge] : impl_->phases) {
    if (!counts.contains(phase)) gauge->Set(0);
  }
  for (const auto& [phase, count] : counts) {
    Gauge*& gauge = impl_->phases[phase];
    if (gauge == nullptr) gauge = &impl_->jobs_by_phase->Add({{"phase", phase}});
    gauge->Set(count);
  }
}

void OperatorMetrics::UpdateJob(const std::string& ns, const std::string& job,
                                const coordinator::JobSessionSnapshot& snapshot,
                                const JobStanding& standing) {
  std::lock_guard lock(impl_->mutex);
  auto [found, first_seen] = impl_->jobs.try_emplace({ns, job});
  JobSeries& series = found->second;
  if (first_seen) {
    for (std::size_t i = 0; i < kJobGauges.size(); ++i) {
      series.gauges[i] = &impl_->job_families[i]->Add({{"namespace", ns}, {"job", job}});
    }
    series.worker_failures = &impl_->worker_failures->Add({{"namespace", ns}, {"job", job}});
    // Every kind's counter from 0, so the first rebalance of a kind is an increase Prometheus
    // sees (a series born at 1 has none, and the demo's dashboard annotation, increase() > 0,
    // then showed no rebalance when the slowdown was answered by the only speed plan).
    std::vector<std::string> kinds = {kOtherRebalanceKind};
    for (const auto& [kind, matches] : kRebalanceKinds) kinds.emplace_back(kind);
    for (const std::string& kind : kinds) {
      series.rebalances[kind] =
          &impl_->rebalances->Add({{"namespace", ns}, {"job", job}, {"reason", kind}});
    }
  }
  series.worker_failures->Set(static_cast<double>(standing.worker_failures));
  if (standing.phase != series.phase) {
    // One series per job, labelled with its current phase: alerts ask "is it running?".
    if (series.phase_gauge != nullptr) impl_->job_phase->Remove(series.phase_gauge);
    series.phase_gauge = nullptr;
    series.phase = standing.phase;
    if (!standing.phase.empty()) {
      series.phase_gauge =
          &impl_->job_phase->Add({{"namespace", ns}, {"job", job}, {"phase", standing.phase}});
      series.phase_gauge->Set(1);
    }
  }
  for (std::size_t i = 0; i < kJobGauges.size(); ++i) {
    series.gauges[i]->Set(kJobGauges[i].value(snapshot));
  }

  // Waiting members (rank -1) train nothing, so only ranked ones have worker series.
  std::map<std::string, const MemberSnapshot*> ranked;
  for (const MemberSnapshot& member : snapshot.members) {
    if (member.rank >= 0) ranked[member.pod] = &member;
  }
  for (auto it = series.workers.begin(); it != series.workers.end();) {
    const auto member = ranked.find(it->first);
    if (member == ranked.end() || member->second->gpu_product != it->second.gpu_product) {
      impl_->RemoveWorker(it->second);
      it = series.workers.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [pod, member] : ranked) {
    auto [worker, added] = series.workers.try_emplace(pod);
    if (added) {
      worker->second.gpu_product = member->gpu_product;
      const Labels labels = {
          {"namespace", ns}, {"job", job}, {"pod", pod}, {"gpu_product", member->gpu_product}};
      for (std::size_t i = 0; i < kWorkerGauges.size(); ++i) {
        worker->second.gauges[i] = &impl_->worker_families[i]->Add(labels);
      }
    }
    for (std::size_t i = 0; i < kWorkerGauges.size(); ++i) {
      worker->second.gauges[i]->Set(kWorkerGauges[i].value(*member));
    }
  }

  // The snapshot only keeps the last rebalance's reason, so when several happened between two
  // updates all are counted under it. A count that went down means a fresh session (the
  // coordinator restarted the job), whose changes are all new.
  const int previous = first_seen ? 0 : series.plan_changes;
  const int new_changes =
      snapshot.plan_changes >= previous ? snapshot.plan_changes - previous : snapshot.plan_changes;
  series.plan_changes = snapshot.plan_changes;
  if (new_changes > 0) {
    const std::string kind = RebalanceReasonKind(snapshot.last_rebalance.reason);
    series.rebalances.at(kind)->Increment(new_changes);
  }
}

void OperatorMetrics::RemoveJob(const std::string& ns, const std::string& job) {
  std::lock_guard lock(impl_->mutex);
  const auto found = impl_->jobs.find({ns, job});
  if (found == impl_->jobs.end()) return;
  impl_->RemoveSeries(found->second);
  impl_->jobs.erase(found);
}

void OperatorMetrics::RemoveAllJobs() {
  std::lock_guard lock(impl_->mutex);
  for (const auto& [key, series] : impl_->jobs) impl_->RemoveSeries(series);
  impl_->jobs.clear();
}

void OperatorMetrics::Impl::RemoveSeries(const JobSeries& series) {
  for (std::size_t i = 0; i < kJobGauges.size(); ++i) {
    job_families[i]->Remove(series.gauges[i]);
  }
  worker_failures->Remove(series.worker_failures);
  if (series.phase_gauge != nullptr) job_phase->Remove(series.phase_gauge);
  for (const auto& [pod, worker] : series.workers) RemoveWorker(worker);
  for (const auto& [kind, counter] : series.rebalances) rebalances->Remove(counter);
}

std::string OperatorMetrics::Serialize() const {
  return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace fulcrum::operator_main
