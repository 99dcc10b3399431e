#include "tests/support/subprocess.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <memory>

namespace fulcrum::testing {

CommandResult RunShell(const std::string& command) {
  CommandResult result;
  // The newline lets a command end with a here-document.
  const std::string with_stderr = "(" + command + "\n) 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(with_stderr.c_str(), "r"), pclose);
  if (!pipe) return result;
  std::array<char, 4096> buffer{};
  while (size_t n = fread(buffer.data(), 1, buffer.size(), pipe.get())) result.output.append(buffer.data(), n);
  const int status = pclose(pipe.release());
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace fulcrum::testing
