#include "tests/tools/local_node/runtime/container_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include "common/rfc3339.h"
#include "tests/tools/local_node/runtime/pidfd.h"
#include "tests/tools/local_node/runtime/state_files.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// How long a shim may take to exec the container before the start counts as failed.
constexpr auto kStartTimeout = 20s;

bool FileExists(const fs::path& path) {
  std::error_code error;
  return fs::exists(path, error);
}

Result<pid_t> SpawnShim(const std::vector<std::string>& shim_command, const fs::path& state_dir) {
  std::vector<std::string> argv = shim_command;
  argv.push_back(state_dir.string());
  std::vector<char*> pointers;
  for (std::string& arg : argv) pointers.push_back(arg.data());
  pointers.push_back(nullptr);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  // A session of its own: a signal to the agent's process group (a killed agent) does not reach
  // the shim, so its container lives on for the next agent to adopt.
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string shim_log = (state_dir / state_file::kShimLog).string();
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, shim_log.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  pid_t pid = -1;
  const int error =
      ::posix_spawn(&pid, pointers[0], &actions, &attributes, pointers.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot start the shim " + argv[0] + ": " + std::strerror(error));
  }
  return pid;
}

}  // namespace

std::optional<unsigned long long> ProcessStartTicks(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return std::nullopt;
  const auto close = line.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  std::string field;
  // After the name: state is field 3, starttime field 22.
  for (int index = 3; index < 22; ++index) fields >> field;
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return std::nullopt;
  return ticks;
}

Result<std::unique_ptr<ContainerProcess>> ContainerProcess::Launch(
    const std::vector<std::string>& shim_command, const fs::path& state_dir,
    const ContainerSpec& spec) {
  if (Status written = WriteJsonFile(state_dir / state_file::kSpec, ToJson(spec)); !written.ok()) {
    return written.error();
  }
  auto pid = SpawnShim(shim_command, state_dir);
  if (!pid.ok()) return pid.error();
  auto process = std::make_unique<ContainerProcess>(Key(), state_dir);
  process->shim_pid_ = *pid;
  process->pidfd_ = PidfdOpen(*pid);
  const auto ticks = ProcessStartTicks(*pid);
  if (Status recorded = WriteJsonFile(state_dir / state_file::kShim,
                                      {{"pid", *pid}, {"startTicks", ticks.value_or(0)}});
      !recorded.ok()) {
    process->Signal(SIGKILL);
    return recorded.error();
  }
  // Wait for the shim's word: started.json once the exec succeeded, exit.json if it failed.
  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (FileExists(state_dir / state_file::kStarted)) {
      process->ReadStarted();
      return process;
    }
    if (!process->Running()) return process;
    if (process->pidfd_ >= 0) {
      pollfd ready{process->pidfd_, POLLIN, 0};
      ::poll(&ready, 1, 10);
    } else {
      std::this_thread::sleep_for(10ms);
    }
  }
  ::kill(*pid, SIGKILL);
  return MakeError(ErrorCode::kDeadlineExceeded,
                   "the shim did not start the container within 20 s (see " +
                       (state_dir / state_file::kShimLog).string() + ")");
}

std::unique_ptr<ContainerProcess> ContainerProcess::Adopt(const fs::path& state_dir) {
  auto process = std::make_unique<ContainerProcess>(Key(), state_dir);
  process->ReadStarted();
  auto shim = ReadJsonFile(state_dir / state_file::kShim);
  if (shim.ok() && shim->has_value()) {
    const nlohmann::json& record = **shim;
    const pid_t pid = record.value("pid", -1);
    const unsigned long long ticks = record.value("startTicks", 0ULL);
    if (pid > 0) {
      // Open first, then check: if the start time matches, the descriptor is of our shim.
      const int pidfd = PidfdOpen(pid);
      if (pidfd >= 0 && ProcessStartTicks(pid) == ticks) {
        process->shim_pid_ = pid;
        process->pidfd_ = pidfd;
      } else if (pidfd >= 0) {
        ::close(pidfd);
      }
    }
  }
  if (process->pidfd_ < 0) process->Finish();
  return process;
}

ContainerProcess::~ContainerProcess() {
  if (pidfd_ >= 0) ::close(pidfd_);
}

void ContainerProcess::ReadStarted() {
  auto started = ReadJsonFile(state_dir_ / state_file::kStarted);
  if (!started.ok() || !started->has_value()) return;
  container_pid_ = (*started)->value("pid", -1);
  started_at_ = (*started)->value("startedAt", "");
}

bool ContainerProcess::Running() {
  if (exit_) return false;
  if (pidfd_ >= 0) {
    pollfd ready{pidfd_, POLLIN, 0};
    if (::poll(&ready, 1, 0) == 0) return true;
  }
  Finish();
  return false;
}

void ContainerProcess::Finish() {
  if (pidfd_ >= 0) {
    ::close(pidfd_);
    pidfd_ = -1;
  }
  // Reap our own shim (an adopted one is not our child: ECHILD, nothing to do).
  if (shim_pid_ > 0) ::waitpid(shim_pid_, nullptr, WNOHANG);
  if (container_pid_ < 0) ReadStarted();
  auto recorded = ReadJsonFile(state_dir_ / state_file::kExit);
  if (recorded.ok() && recorded->has_value()) {
    exit_ = ContainerExitFromJson(**recorded);
    return;
  }
  ContainerExit unknown;
  unknown.exit_code = 137;
  unknown.reason = "ContainerStatusUnknown";
  unknown.message =
      "the container's shim ended without recording how the container ended (it was killed)";
  unknown.started_at = started_at_;
  unknown.finished_at = FormatRfc3339(std::chrono::system_clock::now());
  exit_ = unknown;
}

void ContainerProcess::Signal(int signal) {
  if (exit_) return;
  if (container_pid_ > 0) {
    ::kill(-container_pid_, signal);
  } else if (shim_pid_ > 0 && pidfd_ >= 0) {
    PidfdSendSignal(pidfd_, signal);  // not started yet: the shim passes SIGTERM on
  }
}

}  // namespace fulcrum::local_node
