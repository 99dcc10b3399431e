// RFC 3339 times in UTC, as Kubernetes writes them, through abseil's time library (one
// formatter and one parser for every Fulcrum process): metav1.Time to the second
// ("2026-11-27T06:41:15Z"), metav1.MicroTime to the microsecond ("2026-11-27T06:41:15.123456Z"),
// log lines to the millisecond. Fractions are cut, never rounded up (as Go's time.Format does),
// and always written in full, so the text has one width per precision.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace fulcrum {

enum class TimePrecision { kSeconds, kMilliseconds, kMicroseconds };

std::string FormatRfc3339(std::chrono::system_clock::time_point time,
                          TimePrecision precision = TimePrecision::kSeconds);

// The same from a protobuf Timestamp's parts (seconds since 1970 and nanoseconds into that
// second), which reach years (up to 9999 and past) that a system_clock time point cannot.
std::string FormatRfc3339(std::int64_t unix_seconds, std::int32_t nanos, TimePrecision precision);

// Any RFC 3339 time (offset or "Z", with or without a fraction); an error naming `field`
// (the input the text came from) otherwise.
Result<std::chrono::system_clock::time_point> ParseRfc3339(std::string_view text,
                                                           std::string_view field);

}  // namespace fulcrum
