#include "common/log.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "common/rfc3339.h"

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

}  // namespace

void Write(Level level, std::string_view component, std::string_view job, std::string_view message,
           const nlohmann::json& fields) {
  // Read once: the threshold is configuration, not state that changes at run time.
  static const Level threshold = ThresholdFromEnvironment();
  if (level < threshold) return;
  nlohmann::json line = {
      {"ts", FormatRfc3339(std::chrono::system_clock::now(), TimePrecision::kMilliseconds)},
      {"level", LevelName(level)},
      {"component", component}};
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
