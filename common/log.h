// Structured logs for every Fulcrum process: one JSON object per line on stderr
// with ts (UTC, ISO 8601), level, component, job (when there is one) and msg,
// plus any fields the caller adds. Lines are read by machines (kubectl logs | jq),
// so each one parses on its own and lines never interleave. Lines below
// $FULCRUM_LOG_LEVEL (debug|info|warning|error, default info) are dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fulcrum::log {

enum class Level { kDebug, kInfo, kWarning, kError };

void Write(Level level, std::string_view component, std::string_view job, std::string_view message,
           const nlohmann::json& fields = nlohmann::json::object());

inline void Info(std::string_view component, std::string_view job, std::string_view message,
                 const nlohmann::json& fields = nlohmann::json::object()) {
  Write(Level::kInfo, component, job, message, fields);
}
inline void Warn(std::string_view component, std::string_view job, std::string_view message,
                 const nlohmann::json& fields = nlohmann::json::object()) {
  Write(Level::kWarning, component, job, message, fields);
}
inline void Error(std::string_view component, std::string_view job, std::string_view message,
                  const nlohmann::json& fields = nlohmann::json::object()) {
  Write(Level::kError, component, job, message, fields);
}

// A named source of lines (a component, optionally bound to a job). Cheap to copy.
class Logger {
 public:
  explicit Logger(std::string component, std::string job = {})
      : component_(std::move(component)), job_(std::move(job)) {}

  void Debug(std::string_view message,
             const nlohmann::json& fields = nlohmann::json::object()) const {
    Write(Level::kDebug, component_, job_, message, fields);
  }
  void Info(std::string_view message,
            const nlohmann::json& fields = nlohmann::json::object()) const {
    Write(Level::kInfo, component_, job_, message, fields);
  }
  void Warning(std::string_view message,
               const nlohmann::json& fields = nlohmann::json::object()) const {
    Write(Level::kWarning, component_, job_, message, fields);
  }
  void Error(std::string_view message,
             const nlohmann::json& fields = nlohmann::json::object()) const {
    Write(Level::kError, component_, job_, message, fields);
  }

 private:
  std::string component_;
  std::string job_;
};

}  // namespace fulcrum::log
