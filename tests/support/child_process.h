// Real processes for tests: spawn with output to a file, signal, wait with a deadline, and
// always kill -9 what is still running when the handle goes away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::testing {

class ChildProcess {
 public:
  // argv[0] is the binary; stdout and stderr go to log_path.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  bool Running();
  void Signal(int signal_number);
  // Exit code (128 + signal when killed), or nullopt if still running at the deadline.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  std::optional<int> exit_code_;
  std::string log_path_;
};

// A loopback port that was free a moment ago.
int FreeLoopbackPort();

}  // namespace fulcrum::testing
