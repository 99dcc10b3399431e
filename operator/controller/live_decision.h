// What the reconciler does for a job that is neither finished nor being deleted, decided from
// what it observed: which pods to delete (and the Event for each), whether to tell the trainers
// to stop, which workers to create, the status to write and the Events its change raises. Pure:
// the observation in, the decision out; JobReconciler::ReconcileLive observes and acts.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "operator/controller/job_events.h"
#include "operator/controller/job_spec.h"
#include "operator/controller/job_status.h"
#include "operator/controller/phases.h"
#include "operator/controller/worker_plan.h"
#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::controller {

// What the reconciler read of a live job.
struct LiveWorld {
  // The job's pods, their nodes' health, the failures recorded so far, the pods the coordinator
  // found releasable, now; free_slots only once a first decision said the job could grow.
  WorkerWorld workers;
  nlohmann::json previous;  // the status stored now (or written last)
  coordinator::JobSessionSnapshot training;
};

struct PodDeletion {
  PodRemoval removal;
  std::optional<EventNote> event;  // none for the pods of a job that ended
};

struct LiveDecision {
  WorkerDecisions workers;  // create, could_grow, retry_after
  // New failures, written before the pods that show them are deleted, so each counts once
  // even if the reconcile stops half-way.
  std::optional<nlohmann::json> record_failures;
  std::vector<PodDeletion> deletions;
  // spec.suspend with trainers still running: STOP them (they checkpoint and exit 0).
  bool stop_trainers = false;
  // Their grace is over: deleted anyway (errors ignored: a later reconcile tries again).
  std::vector<PodDeletion> stop_timed_out;
  JobPhase phase = JobPhase::kPending;
  nlohmann::json status;                 // as it will be once the pods to create exist
  std::vector<EventNote> status_events;  // what the status change tells users
  std::size_t failures = 0;              // entries of status.workerFailures
};

LiveDecision DecideLive(const JobSpec& spec, const LiveWorld& world,
                        std::chrono::milliseconds stop_grace);

}  // namespace fulcrum::controller
