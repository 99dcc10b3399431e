// Real processes for multi-process tests: spawn with output to a file, signal, wait with a
// deadline, and always kill -9 what is still running when the handle goes away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
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

// Every JSON line of a file (others skipped), optionally only those with "msg" == msg.
std::vector<nlohmann::json> ReadJsonLines(const std::string& path, const std::string& msg = "");
// Polls `condition` every 50 ms until it holds or `timeout` passes.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
// A loopback port that was free a moment ago.
int FreeLoopbackPort();
// A fresh empty directory under the build tree (or /tmp) for one test.
std::string FreshDirectory(const std::string& name);
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

}  // namespace fulcrum::testing
