// metav1.MicroTime: RFC 3339 in UTC with microseconds, as Lease and Event
// timestamps are written ("2026-01-02T15:04:05.000000Z").
#pragma once

#include <chrono>
#include <string>

namespace fulcrum::kube {

std::string FormatMicroTime(std::chrono::system_clock::time_point time);

// metav1.Time: RFC 3339 in UTC to the second, as pod and node status times are written
// ("2026-01-02T15:04:05Z").
std::string FormatTime(std::chrono::system_clock::time_point time);

}  // namespace fulcrum::kube
