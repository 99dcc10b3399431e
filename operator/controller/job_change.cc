#include "operator/controller/job_change.h"

namespace fulcrum::controller {
namespace {

nlohmann::json WithoutStatus(nlohmann::json job) {
  if (!job.is_object()) return job;
  job.erase("status");
  if (auto metadata = job.find("metadata"); metadata != job.end() && metadata->is_object()) {
    metadata->erase("resourceVersion");
    metadata->erase("managedFields");
  }
  return job;
}

}  // namespace

bool ChangedBeyondStatus(const nlohmann::json& before, const nlohmann::json& after) {
  return WithoutStatus(before) != WithoutStatus(after);
}

}  // namespace fulcrum::controller
