#include "proto/support/json_log.h"

#include <chrono>
#include <cstdio>
#include <mutex>

namespace fulcrum::log {
namespace {

const char* LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

}  // namespace

void Write(Level level, std::string_view component, std::string_view job, std::string_view message,
           const nlohmann::json& fields) {
  nlohmann::json line = fields.is_object() ? fields : nlohmann::json::object();
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  line["ts"] = std::chrono::duration<double>(now).count();
  line["level"] = LevelName(level);
  line["component"] = component;
  line["job"] = job;
  line["msg"] = message;
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  static std::mutex output_mutex;  // one line at a time, never interleaved
  std::lock_guard lock(output_mutex);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace fulcrum::log
