// Running a shell command from a test and capturing what it printed.
#pragma once

#include <string>

namespace fulcrum::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

// Runs `command` with /bin/sh; returns its exit code and output.
CommandResult RunShell(const std::string& command);

// Quotes a string for /bin/sh.
std::string ShellQuote(const std::string& text);

}  // namespace fulcrum::testing
