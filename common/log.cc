#include "common/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
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

Level ThresholdFromEnvironment() {
  const char* text = std::getenv("FULCRUM_LOG_LEVEL");
  const std::string_view value = text != nullptr ? text : "";
  if (value == "debug") return Level::kDebug;
  if (value == "warning") return Level::kWarning;
  if (value == "error") return Level::kError;
  return Level::kInfo;
}

std::string UtcTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<int>(millis));
  return text;
}

}  // namespace

void Write(Level level, std::string_view component, std::string_view job, std::string_view message,
           const nlohmann::json& fields) {
  // Read once: the threshold is configuration, not state that changes at run time.
  static const Level threshold = ThresholdFromEnvironment();
  if (level < threshold) return;
  nlohmann::json line = {
      {"ts", UtcTimestamp()}, {"level", LevelName(level)}, {"component", component}};
  if (!job.empty()) line["job"] = job;
  line["msg"] = message;
  if (fields.is_object()) {
    for (const auto& [key, value] : fields.items()) line[key] = value;
  }
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  static std::mutex output_mutex;  // one line at a time: never interleaved mid-line
  std::lock_guard lock(output_mutex);
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

}  // namespace fulcrum::log
