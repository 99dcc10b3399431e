#include "operator/controller/worker_plan.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/backoff.h"
#include "common/rfc3339.h"

namespace fulcrum::controller {
namespace {

bool Recorded(const std::vector<WorkerFailure>& failures, const std::string& uid) {
  return std::any_of(failures.begin(), failures.end(),
                     [&](const WorkerFailure& failure) { return failure.uid == uid; });
}

// Lowest worker indices no pod of the job has now (a terminating pod still holds its name).
std::vector<int> FreeIndices(const std::vector<WorkerPod>& pods, int count) {
  std::set<int> taken;
  for (const WorkerPod& pod : pods) taken.insert(pod.index);
  std::vector<int> free;
  for (int index = 0; static_cast<int>(free.size()) < count; ++index) {
    if (!taken.contains(index)) free.push_back(index);
  }
  return free;
}

// What a trainer said when it refused its input: the "error" of the last JSON log line that has
// one (the trainer logs JSON lines), else the message's last line.
std::string TrainerError(const std::string& termination_message) {
  std::istringstream lines(termination_message);
  std::string error, last;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    last = line;
    const nlohmann::json entry = nlohmann::json::parse(line, nullptr, false);
    if (entry.is_object() && entry.contains("error") && entry["error"].is_string())
      error = entry["error"].get<std::string>();
  }
  if (!error.empty()) return error;
  return last.empty() ? "no message (see the pod's log)" : last;
}

}  // namespace

std::string_view ToString(RemovalReason reason) {
  switch (reason) {
    case RemovalReason::kFailed:
      return "Failed";
    case RemovalReason::kNodeLost:
      return "NodeLost";
    case RemovalReason::kScaledDown:
      return "ScaledDown";
    case RemovalReason::kFinished:
      return "Finished";
    case RemovalReason::kReleased:
      return "Released";
  }
  return "Unknown";
}

std::chrono::milliseconds ReplacementBackoff(std::size_t failures) {
  constexpr BackoffPolicy kJobController{.initial = std::chrono::seconds(10),
                                         .max = std::chrono::minutes(6)};
  if (failures == 0) return std::chrono::milliseconds{0};
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      kJobController.DelayAt(static_cast<int>(std::min<std::size_t>(failures - 1, 64))));
}

WorkerDecisions DecideWorkers(const JobSpec& spec, const WorkerWorld& world) {
  WorkerDecisions decisions;
  std::vector<const WorkerPod*> active;
  for (const WorkerPod& pod : world.pods) {
    if (pod.terminating) continue;
    if (pod.phase == PodPhase::kSucceeded) {
      // Trainers exit 0 when training is done, and on the STOP that suspends the job.
      if (spec.suspend || world.was_suspended) {
        decisions.remove.push_back({pod.name, pod.uid, RemovalReason::kFinished});
      } else {
        decisions.succeeded = true;
      }
      continue;
    }
    // A lost node ends its pods however they look: a worker killed with its node is not a
    // failure of the job (it does not count against backoffLimit). A NotReady node whose
    // trainer still talks to the coordinator is not lost: Kubernetes itself leaves such pods
    // bound for minutes (the unreachable taint's tolerationSeconds) to ride out control-plane
    // outages.
    const auto health = world.nodes.find(pod.node);
    const bool node_lost =
        health != world.nodes.end() &&
        (health->second == NodeHealth::kGone ||
         (health->second == NodeHealth::kNotReady && !world.connected.contains(pod.name)));
    if (!pod.node.empty() && node_lost) {
      decisions.remove.push_back({pod.name, pod.uid, RemovalReason::kNodeLost,
                                  /*force=*/health->second == NodeHealth::kGone});
      continue;
    }
    if (pod.phase == PodPhase::kFailed) {
      if (!Recorded(world.failures, pod.uid)) {
        decisions.new_failures.push_back(
            {pod.name, pod.uid, pod.failure_reason.empty() ? "Failed" : pod.failure_reason,
             FormatRfc3339(world.now)});
      }
      decisions.remove.push_back({pod.name, pod.uid, RemovalReason::kFailed});
      continue;
    }
    active.push_back(&pod);
  }
  // A trainer that refused its input or diverged would do so again: fail the job now, with the
  // trainer's own words, instead of replacing the pod until backoffLimit.
  for (const WorkerPod& pod : world.pods) {
    if (pod.phase != PodPhase::kFailed) continue;
    if (pod.exit_code == kTrainerInvalidInputExitCode) {
      decisions.failed_reason = "InvalidInput";
      decisions.failed_message = "worker " + pod.name +
                                 " refused its input: " + TrainerError(pod.termination_message) +
                                 ". Fix the job's data, model or args and create it again";
    } else if (pod.exit_code == kTrainerDivergedExitCode) {
      decisions.failed_reason = "Diverged";
      decisions.failed_message =
          "worker " + pod.name + ": " + TrainerError(pod.termination_message);
    } else {
      continue;
    }
    for (const WorkerPod* other : active) {
      decisions.remove.push_back({other->name, other->uid, RemovalReason::kFinished});
    }
    return decisions;
  }
  const std::size_t failures = world.failures.size() + decisions.new_failures.size();
  if (failures > static_cast<std::size_t>(spec.backoff_limit)) {
    decisions.failed_reason = "BackoffLimitExceeded";
    decisions.failed_message =
        std::to_string(failures) + " worker pods failed, more than " + "spec.backoffLimit (" +
        std::to_string(spec.backoff_limit) + "); the last: " +
        (decisions.new_failures.empty() ? world.failures.back() : decisions.new_failures.back())
            .reason +
        ". See the pods' logs and Events";
    for (const WorkerPod* pod : active) {
      decisions.remove.push_back({pod->name, pod->uid, RemovalReason::kFinished});
    }
    return decisions;
  }
  if (decisions.succeeded) return decisions;  // the others finish the same last step and exit
  if (spec.suspend) {
    // Running trainers stop themselves after a checkpoint (the reconciler's STOP); the rest
    // have nothing to save.
    std::erase_if(active, [&](const WorkerPod* pod) {
      if (pod->phase == PodPhase::kRunning) return false;
      decisions.remove.push_back({pod->name, pod->uid, RemovalReason::kFinished});
      return true;
    });
    return decisions;
  }

  std::erase_if(active, [&](const WorkerPod* pod) {
    if (!world.releasable.contains(pod->name)) return false;
    decisions.remove.push_back({pod->name, pod->uid, RemovalReason::kReleased});
    return true;
  });
  const int max = spec.max_replicas;
  const int count = static_cast<int>(active.size());
  if (count > max) {
    // Drain the extra workers: unscheduled ones first, then the highest indices.
    std::sort(active.begin(), active.end(), [](const WorkerPod* a, const WorkerPod* b) {
      if (a->node.empty() != b->node.empty()) return a->node.empty();
      return a->index > b->index;
    });
    for (int i = 0; i < count - max; ++i) {
      decisions.remove.push_back({active[i]->name, active[i]->uid, RemovalReason::kScaledDown});
    }
    return decisions;
  }
  decisions.could_grow = count < max;
  const int target = std::min(
      max, std::max(std::min(spec.min_replicas, max), count + std::max(0, world.free_slots)));
  if (target <= count) return decisions;
  if (failures > 0) {
    // Replacements wait out the back-off, counted from the latest failure.
    const std::string& last =
        (decisions.new_failures.empty() ? world.failures.back() : decisions.new_failures.back())
            .time;
    const auto failed_at = ParseRfc3339(last, "status.workerFailures.time").value_or(world.now);
    const auto ready_at = failed_at + ReplacementBackoff(failures);
    if (world.now < ready_at) {
      decisions.retry_after =
          std::chrono::duration_cast<std::chrono::milliseconds>(ready_at - world.now);
      return decisions;
    }
  }
  decisions.create = FreeIndices(world.pods, target - count);
  return decisions;
}

}  // namespace fulcrum::controller
