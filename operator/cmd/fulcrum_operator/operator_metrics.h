// fulcrum-operator's Prometheus metrics: the controller's own health (reconcile time and
// errors, work queue), jobs by phase, rebalances by kind, and per job and per worker the
// coordinator's view of throughput and batches. Series of workers that left and of deleted jobs
// are removed, so a long-running operator does not export stale or ever-growing series.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "operator/coordinator/job_session_snapshot.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace fulcrum::operator_main {

// A small fixed label value for the coordinator's free-text plan reason, so the rebalances
// counter does not get one series per distinct message: "initial", "membership", "memory",
// "global_batch", "speed", "refinement" or "other". A reason made of several joined with "; "
// takes the first kind, in that order of precedence: membership, memory, global_batch, speed,
// refinement, initial.
std::string RebalanceReasonKind(std::string_view reason);

// A job's status beyond the coordinator's view of it.
struct JobStanding {
  std::string phase;                // status.phase; empty: not exported
  std::size_t worker_failures = 0;  // entries of status.workerFailures
};

// Every method is thread-safe.
class OperatorMetrics {
 public:
  OperatorMetrics();
  ~OperatorMetrics();
  OperatorMetrics(const OperatorMetrics&) = delete;
  OperatorMetrics& operator=(const OperatorMetrics&) = delete;

  // For an exposer other than Serialize's text.
  std::shared_ptr<prometheus::Registry> registry() const;

  void ObserveReconcile(double seconds, bool error);
  // Whether this replica leads (holds the Lease, reconciles, serves the coordinator).
  void SetLeader(bool leading);
  void SetQueueDepth(std::size_t depth);
  // How long a key waited in the work queue before a worker took it.
  void ObserveQueueLatency(double seconds);
  // How long the coordinator took from a step's last report to its plan decision
  // (coordinator::StepCompletion); one histogram for all jobs, a series per job would be many.
  void ObserveStepDecision(double seconds);

  // Jobs by phase. A phase set before and missing now goes to 0; the known phases (Pending,
  // Running, Rebalancing, Suspended, Succeeded, Failed) are always exported.
  void SetJobsByPhase(const std::map<std::string, int>& counts);

  // The job's and its ranked workers' gauges from the coordinator's snapshot; removes the series
  // of pods that are no longer ranked members; counts the rebalances since the last update.
  // `standing`: what the job's status says beyond the coordinator's snapshot.
  void UpdateJob(const std::string& ns, const std::string& job,
                 const fulcrum::coordinator::JobSessionSnapshot& snapshot,
                 const JobStanding& standing = {});
  // Removes every series of the job (its gauges, its workers', its rebalance counters).
  void RemoveJob(const std::string& ns, const std::string& job);
  // Removes every job's series: a replica that stops leading no longer knows them, and stale
  // copies next to the new leader's would double sums and keep alerts firing.
  void RemoveAllJobs();

  // The Prometheus text exposition format (version 0.0.4) of every metric.
  std::string Serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fulcrum::operator_main
