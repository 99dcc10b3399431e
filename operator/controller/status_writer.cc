#include "operator/controller/status_writer.h"

#include "operator/controller/job_status.h"

namespace fulcrum::controller {

using std::chrono::milliseconds;

int64_t VersionNumber(const nlohmann::json& object) {
  const std::string version = object["metadata"].value("resourceVersion", "0");
  try {
    return std::stoll(version);
  } catch (...) {
    return 0;
  }
}

StatusWriter::StatusWriter(JobWriter& writer, milliseconds min_interval)
    : writer_(writer), min_interval_(min_interval) {}

nlohmann::json StatusWriter::Current(const nlohmann::json& job) {
  nlohmann::json stored = job.value("status", nlohmann::json::object());
  std::lock_guard lock(mutex_);
  const auto written = written_.find(job["metadata"].value("uid", ""));
  if (written != written_.end() && written->second.resource_version > VersionNumber(job)) {
    return written->second.status;
  }
  return stored;
}

Result<std::optional<milliseconds>> StatusWriter::Write(const nlohmann::json& job,
                                                        const nlohmann::json& status) {
  const nlohmann::json current = Current(job);
  if (status == current) return std::optional<milliseconds>{};
  const std::string uid = job["metadata"].value("uid", "");
  const auto now = std::chrono::steady_clock::now();
  if (!StatusDiffersBeyondProgress(status, current)) {
    std::lock_guard lock(mutex_);
    const auto written = written_.find(uid);
    if (written != written_.end() && now - written->second.at < min_interval_) {
      return std::optional<milliseconds>{
          std::chrono::duration_cast<milliseconds>(min_interval_ - (now - written->second.at))};
    }
  }
  // A merge patch of the whole status: no resourceVersion to go stale while the cache lags.
  auto patched = writer_.PatchStatus(HeteroTrainingJobs(), job["metadata"].value("namespace", ""),
                                     job["metadata"].value("name", ""), {{"status", status}});
  if (!patched.ok()) return patched.error();
  std::lock_guard lock(mutex_);
  written_[uid] = {VersionNumber(*patched), patched->value("status", status), now};
  return std::optional<milliseconds>{};
}

void StatusWriter::Forget(const std::string& uid) {
  std::lock_guard lock(mutex_);
  written_.erase(uid);
}

}  // namespace fulcrum::controller
