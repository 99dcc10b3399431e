// The lifecycle phases of a HeteroTrainingJob (status.phase) and of its trainer pods
// (status.phase of a Pod), as enums: decisions compare values the compiler checks, and the
// strings exist only where the API reads or writes them.
#pragma once

#include <string>
#include <string_view>

namespace fulcrum::controller {

enum class JobPhase { kPending, kRunning, kRebalancing, kSuspended, kSucceeded, kFailed };

std::string_view ToString(JobPhase phase);
// A stored status.phase; "" (no status yet) and anything unknown read as Pending.
JobPhase ParseJobPhase(std::string_view text);
// Succeeded or Failed: the job ends and takes no new workers.
bool Finished(JobPhase phase);
// Running or Rebalancing: the workers train.
bool Training(JobPhase phase);

enum class PodPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };

std::string_view ToString(PodPhase phase);
// A Pod's status.phase; a pod without one is Pending (the API server has not set it yet).
PodPhase ParsePodPhase(std::string_view text);
// Succeeded or Failed: the pod holds no GPU any more.
bool Ended(PodPhase phase);

}  // namespace fulcrum::controller
