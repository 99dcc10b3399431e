// Structured JSON-lines logs shared by both ends of the protocol (coordinator and trainer):
// one object per line on stderr with time, level, component, job and message, plus fields.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace fulcrum::log {

enum class Level { kDebug, kInfo, kWarning, kError };

// Writes {"ts", "level", "component", "job", "msg", ...fields} as one line; thread-safe.
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

}  // namespace fulcrum::log
