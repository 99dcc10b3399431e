// The benchmark's server as a child process (this binary's `serve` mode), spoken to one line
// at a time over its stdin and stdout.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::bench {

class ServerProcess {
 public:
  // Runs `arguments` (argv[0] first) with pipes to its stdin and stdout; its stderr (the
  // coordinator's logs) goes to `log_file`.
  static Result<std::unique_ptr<ServerProcess>> Spawn(const std::vector<std::string>& arguments,
                                                      const std::string& log_file);
  // Closes its stdin (which stops it) and waits for it to exit.
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  pid_t pid() const { return pid_; }
  Result<std::string> ReadLine();
  // Sends one line and returns the one it answers.
  Result<std::string> Ask(const std::string& line);

 private:
  ServerProcess() = default;
  pid_t pid_ = -1;
  FILE* to_child_ = nullptr;
  FILE* from_child_ = nullptr;
};

}  // namespace fulcrum::bench
