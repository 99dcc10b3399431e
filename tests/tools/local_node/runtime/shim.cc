#include "tests/tools/local_node/runtime/shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/rfc3339.h"
#include "tests/tools/local_node/runtime/container_exit.h"
#include "tests/tools/local_node/runtime/container_spec.h"
#include "tests/tools/local_node/runtime/state_files.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;
const log::Logger kLog{"local-node.shim"};

std::string Now() {
  return FormatRfc3339(std::chrono::system_clock::now());
}

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// A start that failed before the container ran: recorded as containerd records it.
int RecordStartError(const fs::path& state_dir, const std::string& message) {
  ContainerExit exit;
  exit.exit_code = 128;
  exit.reason = "StartError";
  exit.message = message;
  exit.finished_at = Now();
  kLog.Error("container did not start", {{"reason", message}});
  return WriteJsonFile(state_dir / state_file::kExit, ToJson(exit)).ok() ? 0 : 1;
}

// The end of a container's log, as kubelet takes it for FallbackToLogsOnError: the last 80 lines,
// at most 2048 bytes.
std::string LogTail(const std::string& log_file) {
  constexpr std::size_t kMaxBytes = 2048;
  constexpr int kMaxLines = 80;
  std::ifstream file(log_file, std::ios::binary | std::ios::ate);
  if (!file) return "";
  const auto size = static_cast<std::size_t>(file.tellg());
  const std::size_t start = size > kMaxBytes ? size - kMaxBytes : 0;
  file.seekg(static_cast<std::streamoff>(start));
  std::string tail(size - start, '\0');
  file.read(tail.data(), static_cast<std::streamsize>(tail.size()));
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  int lines = 0;
  for (std::size_t i = tail.size(); i-- > 0;) {
    if (tail[i] == '\n' && ++lines == kMaxLines) return tail.substr(i + 1);
  }
  return tail;
}

// Makes `target` exist as the same kind of file as `source`, so that it can be
// a bind-mount point. Directories created this way stay on the host (empty)
// after the pod is gone: the processes here share the host's file system.
Status EnsureMountPoint(const fs::path& source, const fs::path& target) {
  std::error_code error;
  if (fs::is_directory(source, error)) {
    fs::create_directories(target, error);
    if (error && !fs::is_directory(target)) {
      return MakeError(ErrorCode::kInternal,
                       "cannot create mount point " + target.string() + ": " + error.message());
    }
    return Ok();
  }
  if (!fs::exists(target, error)) {
    fs::create_directories(target.parent_path(), error);
    std::ofstream create(target);
    if (!create)
      return MakeError(ErrorCode::kInternal, "cannot create mount point " + target.string());
  }
  return Ok();
}

Status MountVolumes(const ContainerSpec& spec) {
  if (spec.mounts.empty()) return Ok();
  // A mount namespace of our own, whose mounts do not propagate back to the host's.
  if (::unshare(CLONE_NEWNS) != 0)
    return MakeError(ErrorCode::kInternal, Errno("unshare(CLONE_NEWNS)"));
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    return MakeError(ErrorCode::kInternal, Errno("making / private"));
  }
  for (const BindMount& mount : spec.mounts) {
    if (Status status = EnsureMountPoint(mount.source, mount.target); !status.ok()) return status;
    if (::mount(mount.source.c_str(), mount.target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) !=
        0) {
      return MakeError(ErrorCode::kInternal,
                       Errno("bind-mounting " + mount.source.string() + " at " + mount.target));
    }
    if (mount.read_only && ::mount(nullptr, mount.target.c_str(), nullptr,
                                   MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
      return MakeError(ErrorCode::kInternal, Errno("making " + mount.target + " read-only"));
    }
  }
  return Ok();
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& text : strings) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// What the child reports through the close-on-exec pipe when it could not exec.
struct ChildFailure {
  int stage;  // 0: chdir, 1: exec
  int error;
};

// Kills processes that are still our children after the container's main process
// ended: the subreaper inherits the container's orphans, even those that left its
// process group.
void KillRemainingChildren() {
  const pid_t self = ::getpid();
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return;
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    // Field 4 (ppid) follows the command name, which is in parentheses and may hold spaces.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int parent = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &parent) == 2 && parent == self) {
      ::kill(pid, SIGKILL);
    }
  }
  ::closedir(proc);
}

void ReapEverything() {
  using namespace std::chrono_literals;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t pid = ::waitpid(-1, nullptr, WNOHANG);
    if (pid < 0 && errno == ECHILD) return;
    if (pid <= 0) {
      KillRemainingChildren();
      std::this_thread::sleep_for(10ms);
    }
  }
}

}  // namespace

int RunShim(const fs::path& state_dir) {
  // Nothing the agent had open belongs to the container.
  ::close_range(3, UINT_MAX, 0);
  auto spec_json = ReadJsonFile(state_dir / state_file::kSpec);
  if (!spec_json.ok() || !spec_json->has_value()) {
    return RecordStartError(
        state_dir, "no readable " + std::string(state_file::kSpec) + " in " + state_dir.string());
  }
  auto spec = ContainerSpecFromJson(**spec_json);
  if (!spec.ok())
    return RecordStartError(state_dir, "bad container spec: " + spec.error().ToString());
  if (Status mounted = MountVolumes(*spec); !mounted.ok())
    return RecordStartError(state_dir, mounted.error().message);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  const int log_fd =
      ::open(spec->log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return RecordStartError(state_dir, Errno("opening the log file " + spec->log_file));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int failure_pipe[2];
  if (::pipe2(failure_pipe, O_CLOEXEC) != 0) return RecordStartError(state_dir, Errno("pipe"));

  // Signals are taken synchronously (sigwaitinfo) from here on; the child restores the mask.
  sigset_t handled, original;
  sigemptyset(&handled);
  for (int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&handled, signal);
  ::sigprocmask(SIG_BLOCK, &handled, &original);

  std::vector<std::string> argv = spec->argv;
  std::vector<std::string> env = spec->env;
  std::vector<char*> argv_pointers = NullTerminated(argv);
  std::vector<char*> env_pointers = NullTerminated(env);
  const std::string working_dir = spec->working_dir;
  const pid_t shim_pid = ::getpid();
  const std::string started_at = Now();

  const pid_t child = ::fork();
  if (child < 0) return RecordStartError(state_dir, Errno("fork"));
  if (child == 0) {
    // Only async-signal-safe calls until exec.
    ::sigprocmask(SIG_SETMASK, &original, nullptr);
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != shim_pid) ::_exit(137);  // the shim died before the line above
    ::dup2(null_fd, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ChildFailure failure{0, 0};
    if (!working_dir.empty() && ::chdir(working_dir.c_str()) != 0) {
      failure = {0, errno};
    } else {
      ::execve(argv_pointers[0], argv_pointers.data(), env_pointers.data());
      failure = {1, errno};
    }
    [[maybe_unused]] const ssize_t ignored = ::write(failure_pipe[1], &failure, sizeof failure);
    ::_exit(127);
  }
  ::close(failure_pipe[1]);
  ::setpgid(child, child);  // also here, so the group exists before anyone signals it
  ChildFailure failure{};
  ssize_t got;
  do {
    got = ::read(failure_pipe[0], &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    ::waitpid(child, nullptr, 0);
    const std::string what =
        failure.stage == 0 ? "chdir to workingDir " + working_dir : "exec " + argv[0];
    errno = failure.error;
    return RecordStartError(state_dir, Errno(what));
  }
  if (Status written = WriteJsonFile(state_dir / state_file::kStarted,
                                     {{"pid", child}, {"startedAt", started_at}});
      !written.ok()) {
    kLog.Error("cannot record the start", {{"error", written.error().ToString()}});
  }
  kLog.Info("container started", {{"pid", child}, {"argv", spec->argv}});

  int wait_status = 0;
  for (bool running = true; running;) {
    siginfo_t info{};
    if (::sigwaitinfo(&handled, &info) < 0) continue;
    if (info.si_signo != SIGCHLD) {
      ::kill(-child, info.si_signo == SIGQUIT ? SIGQUIT : SIGTERM);
      continue;
    }
    for (pid_t reaped; (reaped = ::waitpid(-1, &wait_status, WNOHANG)) > 0;) {
      if (reaped == child) {
        running = false;
        break;
      }
    }
  }
  const std::string finished_at = Now();
  ::kill(-child, SIGKILL);
  ReapEverything();
  ContainerExit exit = ExitFromWaitStatus(wait_status, started_at, finished_at);
  if (spec->message_from_log_on_error && exit.exit_code != 0) {
    exit.message = LogTail(spec->log_file);
  }
  kLog.Info("container ended", {{"exitCode", exit.exit_code}, {"signal", exit.signal}});
  return WriteJsonFile(state_dir / state_file::kExit, ToJson(exit)).ok() ? 0 : 1;
}

}  // namespace fulcrum::local_node
