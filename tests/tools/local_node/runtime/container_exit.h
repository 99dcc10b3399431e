// How one start of a container ended, as the shim records it (exit.json) and
// the pod status reports it (containerStatuses[].state.terminated).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fulcrum::local_node {

struct ContainerExit {
  int exit_code =
      0;           // 128 + signal for a process ended by a signal, as container runtimes report it
  int signal = 0;  // the signal that ended it, 0 if it exited
  std::string reason;  // Completed (exit 0), Error, StartError, ContainerStatusUnknown
  std::string message;
  std::string started_at;   // RFC 3339; empty if it never started
  std::string finished_at;  // RFC 3339

  bool operator==(const ContainerExit&) const = default;
};

nlohmann::json ToJson(const ContainerExit& exit);
ContainerExit ContainerExitFromJson(
    const nlohmann::json& json);  // tolerant: missing fields stay default

// The record for a process that ended with waitpid status `wait_status`.
ContainerExit ExitFromWaitStatus(int wait_status, std::string started_at, std::string finished_at);

}  // namespace fulcrum::local_node
