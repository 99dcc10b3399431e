// Small things tests do while they wait for the world: poll a condition, read a file.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace fulcrum::testing {

// Polls `condition` (every 50 ms) until it holds or `timeout` passes; the last check is made
// at the deadline. Timeouts are generous: the machines are shared and slow at times, and a
// pass returns as soon as the condition holds.
bool WaitUntil(const std::function<bool()>& condition,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));

// The file's bytes; empty if it does not exist (yet).
std::string ReadFile(const std::filesystem::path& path);

}  // namespace fulcrum::testing
