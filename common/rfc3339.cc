#include "common/rfc3339.h"

#include <absl/time/time.h>

namespace fulcrum {
namespace {

// Literal 'Z' rather than absl's "%Ez", which writes UTC as "+00:00"; %E6S and %E3S keep
// trailing zeros, unlike RFC3339_full's %E*S, so every time has the width Kubernetes writes.
const char* FormatOf(TimePrecision precision) {
  switch (precision) {
    case TimePrecision::kMilliseconds:
      return "%Y-%m-%d%ET%H:%M:%E3SZ";
    case TimePrecision::kMicroseconds:
      return "%Y-%m-%d%ET%H:%M:%E6SZ";
    case TimePrecision::kSeconds:
      break;
  }
  return "%Y-%m-%d%ET%H:%M:%SZ";
}

std::string Format(absl::Time time, TimePrecision precision) {
  return absl::FormatTime(FormatOf(precision), time, absl::UTCTimeZone());
}

}  // namespace

std::string FormatRfc3339(std::chrono::system_clock::time_point time, TimePrecision precision) {
  return Format(absl::FromChrono(time), precision);
}

std::string FormatRfc3339(std::int64_t unix_seconds, std::int32_t nanos, TimePrecision precision) {
  return Format(absl::FromUnixSeconds(unix_seconds) + absl::Nanoseconds(nanos), precision);
}

Result<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text,
                                                           std::string_view field) {
  absl::Time time;
  std::string why;
  if (!absl::ParseTime(absl::RFC3339_full, absl::string_view(text.data(), text.size()), &time,
                       &why)) {
    return InvalidArgument(std::string(field), "'" + std::string(text) +
                                                   "' is not an RFC 3339 time such as "
                                                   "2026-11-27T06:41:15Z (" +
                                                   why + ")");
  }
  return absl::ToChronoTime(time);
}

}  // namespace fulcrum
