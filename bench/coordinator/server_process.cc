#include "bench/coordinator/server_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace fulcrum::bench {

Result<std::unique_ptr<ServerProcess>> ServerProcess::Spawn(
    const std::vector<std::string>& arguments, const std::string& log_file) {
  std::array<int, 2> to_child{};
  std::array<int, 2> from_child{};
  if (pipe2(to_child.data(), O_CLOEXEC) != 0 || pipe2(from_child.data(), O_CLOEXEC) != 0) {
    return MakeError(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, to_child[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, from_child[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> argv;
  for (const std::string& argument : arguments) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  std::unique_ptr<ServerProcess> process(new ServerProcess());
  const int spawned = posix_spawn(&process->pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(to_child[0]);
  close(from_child[1]);
  if (spawned != 0) {
    close(to_child[1]);
    close(from_child[0]);
    process->pid_ = -1;
    return MakeError(ErrorCode::kInternal,
                     "cannot start " + arguments[0] + ": " + std::strerror(spawned));
  }
  process->to_child_ = fdopen(to_child[1], "w");
  process->from_child_ = fdopen(from_child[0], "r");
  return process;
}

ServerProcess::~ServerProcess() {
  if (to_child_ != nullptr) fclose(to_child_);
  if (from_child_ != nullptr) fclose(from_child_);
  if (pid_ > 0) {
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

Result<std::string> ServerProcess::ReadLine() {
  std::string line;
  for (int c = fgetc(from_child_); c != EOF && c != '\n'; c = fgetc(from_child_)) {
    line.push_back(static_cast<char>(c));
  }
  if (line.empty()) return MakeError(ErrorCode::kUnavailable, "the server process said nothing");
  return line;
}

Result<std::string> ServerProcess::Ask(const std::string& line) {
  if (fputs((line + "\n").c_str(), to_child_) == EOF || fflush(to_child_) != 0) {
    return MakeError(ErrorCode::kUnavailable, "the server process is gone");
  }
  return ReadLine();
}

}  // namespace fulcrum::bench
