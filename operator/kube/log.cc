#include "operator/kube/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace fulcrum::kube {
namespace {

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

LogLevel ThresholdFromEnvironment() {
  const char* text = std::getenv("FULCRUM_LOG_LEVEL");
  const std::string_view value = text != nullptr ? text : "";
  if (value == "debug") return LogLevel::kDebug;
  if (value == "warning") return LogLevel::kWarning;
  if (value == "error") return LogLevel::kError;
  return LogLevel::kInfo;
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

void Logger::Debug(std::string_view message, nlohmann::json fields) const {
  Log(LogLevel::kDebug, message, std::move(fields));
}
void Logger::Info(std::string_view message, nlohmann::json fields) const {
  Log(LogLevel::kInfo, message, std::move(fields));
}
void Logger::Warning(std::string_view message, nlohmann::json fields) const {
  Log(LogLevel::kWarning, message, std::move(fields));
}
void Logger::Error(std::string_view message, nlohmann::json fields) const {
  Log(LogLevel::kError, message, std::move(fields));
}

void Logger::Log(LogLevel level, std::string_view message, nlohmann::json fields) const {
  // Read once: the threshold is configuration, not state that changes at run time.
  static const LogLevel threshold = ThresholdFromEnvironment();
  if (level < threshold) return;
  nlohmann::json line = {{"ts", UtcTimestamp()},
                         {"level", LevelName(level)},
                         {"component", component_},
                         {"msg", message}};
  if (fields.is_object()) {
    for (auto& [key, value] : fields.items()) line[key] = std::move(value);
  }
  // One fwrite per line so lines from different threads do not interleave mid-line.
  const std::string text =
      line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
}

}  // namespace fulcrum::kube
