#include "operator/kube/client/micro_time.h"

#include <cstdio>
#include <ctime>

namespace fulcrum::kube {

std::string FormatMicroTime(std::chrono::system_clock::time_point time) {
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(time.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                static_cast<long long>(micros % 1'000'000));
  return text;
}

std::string FormatTime(std::chrono::system_clock::time_point time) {
  const std::string micro = FormatMicroTime(std::chrono::floor<std::chrono::seconds>(time));
  return micro.substr(0, micro.find('.')) + "Z";
}

}  // namespace fulcrum::kube
