// Structured logs: one JSON object per line on stderr, with time, level,
// component and message, plus any fields the caller adds. Operators are read
// by machines (kubectl logs | jq), so every line must parse on its own.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fulcrum::kube {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// A named source of log lines. Cheap to copy; lines below the level set by
// $FULCRUM_LOG_LEVEL (debug|info|warning|error, default info) are dropped.
class Logger {
 public:
  explicit Logger(std::string component) : component_(std::move(component)) {}

  void Debug(std::string_view message, nlohmann::json fields = {}) const;
  void Info(std::string_view message, nlohmann::json fields = {}) const;
  void Warning(std::string_view message, nlohmann::json fields = {}) const;
  void Error(std::string_view message, nlohmann::json fields = {}) const;

  void Log(LogLevel level, std::string_view message, nlohmann::json fields) const;

 private:
  std::string component_;
};

}  // namespace fulcrum::kube
