// The agent's handle on one start of one container: launches a shim for it, or
// adopts the shim a previous agent left running, and reports how it ended.
// Dropping the handle does not stop the container (an agent that is killed
// must leave its containers running for the next one to adopt); Signal does.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/tools/local_node/runtime/container_exit.h"
#include "tests/tools/local_node/runtime/container_spec.h"

namespace fulcrum::local_node {

class ContainerProcess {
 public:
  // Writes `spec` into `state_dir` (which must exist and be empty), starts
  // `shim_command` + `state_dir` and waits until the container runs or has
  // failed to start; in the latter case the handle has already exited (with
  // reason StartError). An error means the shim itself could not be run.
  static Result<std::unique_ptr<ContainerProcess>> Launch(
      const std::vector<std::string>& shim_command, const std::filesystem::path& state_dir,
      const ContainerSpec& spec);
  // The start recorded in `state_dir` by an earlier agent: running if its shim
  // still is (the same process: its start time is checked against pid reuse);
  // ended as exit.json says; or ended unknown (exit 137, ContainerStatusUnknown)
  // when the shim is gone without a record.
  static std::unique_ptr<ContainerProcess> Adopt(const std::filesystem::path& state_dir);

  // Only the factories above make handles (the key is theirs).
  class Key {
    friend class ContainerProcess;
    Key() = default;
  };
  ContainerProcess(Key, std::filesystem::path state_dir) : state_dir_(std::move(state_dir)) {}
  ~ContainerProcess();
  ContainerProcess(const ContainerProcess&) = delete;
  ContainerProcess& operator=(const ContainerProcess&) = delete;

  // Readable (poll) when the shim has ended; -1 once that has been noticed.
  int wait_fd() const { return pidfd_; }
  // Checks without blocking; once false, exit() says how it ended.
  bool Running();
  const std::optional<ContainerExit>& exit() const { return exit_; }
  const std::string& started_at() const { return started_at_; }
  pid_t container_pid() const { return container_pid_; }
  pid_t shim_pid() const { return shim_pid_; }
  const std::filesystem::path& state_dir() const { return state_dir_; }
  // Sends `signal` to the container's process group while it runs.
  void Signal(int signal);

 private:
  void ReadStarted();
  void Finish();  // the shim is gone: read exit.json, or record the end as unknown

  std::filesystem::path state_dir_;
  pid_t shim_pid_ = -1;
  int pidfd_ = -1;
  pid_t container_pid_ = -1;
  std::string started_at_;
  std::optional<ContainerExit> exit_;
};

// /proc/PID/stat's start time (clock ticks after boot): with the pid, it names one
// process for its whole life. nullopt if there is no such process.
std::optional<unsigned long long> ProcessStartTicks(pid_t pid);

}  // namespace fulcrum::local_node
