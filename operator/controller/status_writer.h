// Writes a job's status, paced: a change a user would notice (phase, conditions, workers) is
// written at once; progress alone (step, throughput) at most every `min_interval`. It also
// remembers what it wrote last, because the informer's cache lags its own writes: the next
// reconcile must build on the status just written, not on the older one the cache still holds
// (else it would, for instance, count a recorded worker failure twice).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/result.h"
#include "operator/controller/job_writer.h"

namespace fulcrum::controller {

class StatusWriter {
 public:
  StatusWriter(JobWriter& writer, std::chrono::milliseconds min_interval);

  // The status stored with `job`, or the one written last if the cache has not caught up.
  nlohmann::json Current(const nlohmann::json& job);
  // Writes `status` if it differs from Current(job) in a way users notice, or differs at all
  // and the last write is `min_interval` old. Returns when to look again (a progress change
  // held back), or nothing.
  Result<std::optional<std::chrono::milliseconds>> Write(const nlohmann::json& job,
                                                         const nlohmann::json& status);
  // The job is gone: its memo goes too.
  void Forget(const std::string& uid);

 private:
  struct Written {
    int64_t resource_version = 0;
    nlohmann::json status;
    std::chrono::steady_clock::time_point at;
  };

  JobWriter& writer_;
  const std::chrono::milliseconds min_interval_;
  std::mutex mutex_;
  std::map<std::string, Written> written_;  // by job uid
};

// A resourceVersion as a number (0 for an opaque one: the cache is then taken as current).
int64_t VersionNumber(const nlohmann::json& object);

}  // namespace fulcrum::controller
