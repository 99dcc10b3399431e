// Which trainer pods a job should have now, from what exists: the pure heart of the reconciler.
// Pods in, decisions out (create these workers, delete those pods and why, record these
// failures, fail the job, wait this long); the reconciler carries them out. Level-triggered:
// the same world gives the same decisions, so running it twice changes nothing.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "operator/controller/job_spec.h"
#include "operator/controller/job_status.h"
#include "operator/controller/phases.h"

namespace fulcrum::controller {

// One of the job's pods, as the pod informer has it.
struct WorkerPod {
  std::string name;
  std::string uid;
  int index = -1;  // the fulcrum.dev/worker label
  PodPhase phase = PodPhase::kPending;
  std::string node;            // spec.nodeName; empty while unscheduled
  bool terminating = false;    // metadata.deletionTimestamp is set
  std::string failure_reason;  // for a Failed pod: the container's or pod's reason
  // For a Failed pod: the trainer's exit code, and its termination message (the tail of its log:
  // terminationMessagePolicy FallbackToLogsOnError).
  int exit_code = 0;
  std::string termination_message;
};

// fulcrum-trainer's exit codes that a retry cannot fix, so the job fails at once: input it
// refuses (flags, dataset, model files, a coordinator that refuses it), and a loss that stayed
// non-finite (training diverged: the same recipe would diverge again).
inline constexpr int kTrainerInvalidInputExitCode = 2;
inline constexpr int kTrainerDivergedExitCode = 3;

// A worker pod whose node is gone from the cluster or NotReady.
enum class NodeHealth { kReady, kNotReady, kGone };

struct WorkerWorld {
  std::vector<WorkerPod> pods;
  // Health of each node the job's pods are on (nodes not listed count as ready).
  std::map<std::string, NodeHealth> nodes;
  // Worker slots on nodes that admit this job and are not taken by any trainer pod, nor
  // promised to this job's pods that wait for the scheduler.
  int free_slots = 0;
  std::vector<WorkerFailure> failures;  // recorded so far (status.workerFailures)
  // Pods the coordinator found releasable: the best split gives them nothing.
  std::set<std::string> releasable;
  // Pods whose trainer holds its stream to the coordinator now: it runs, whatever its node's
  // Ready condition says (a node goes NotReady when its lease lapses, as it does for every node
  // across an API server outage, while its containers keep running).
  std::set<std::string> connected;
  // The stored status still says Suspended: trainers that exited 0 did so on the STOP that
  // suspended the job, not because training finished.
  bool was_suspended = false;
  std::chrono::system_clock::time_point now;
};

enum class RemovalReason {
  kFailed,      // the pod failed: replaced after back-off, counted against backoffLimit
  kNodeLost,    // its node is gone, or NotReady with the trainer not connected
  kScaledDown,  // replicas.max was lowered
  kFinished,    // the job ended (Failed, or suspended after its checkpoint)
  kReleased,    // its GPU cannot make the job faster: released instead of held idle
};
std::string_view ToString(RemovalReason reason);

struct PodRemoval {
  std::string pod;
  std::string uid;
  RemovalReason reason;
  bool force = false;  // grace period 0: the node that would stop it gracefully is gone
};

struct WorkerDecisions {
  std::vector<int> create;  // worker indices to create pods for
  std::vector<PodRemoval> remove;
  std::vector<WorkerFailure> new_failures;   // to append to status.workerFailures
  std::optional<std::string> failed_reason;  // the job fails (BackoffLimitExceeded)
  std::string failed_message;
  bool succeeded = false;  // a trainer finished every step
  // Creations held back by the failure back-off: reconcile again after this long.
  std::optional<std::chrono::milliseconds> retry_after;
  // Fewer workers stay than replicas.max, so world.free_slots was read: a caller that left it
  // 0 because counting is costly counts them and decides again.
  bool could_grow = false;
};

// The back-off before replacing a failed worker, after `failures` failures: the Job
// controller's 10 s doubling up to 6 minutes.
std::chrono::milliseconds ReplacementBackoff(std::size_t failures);

// With spec.suspend nothing is created, pods not yet running and pods that have stopped are
// removed, and running ones are left for the reconciler to STOP (they checkpoint and exit 0).
WorkerDecisions DecideWorkers(const JobSpec& spec, const WorkerWorld& world);

}  // namespace fulcrum::controller
