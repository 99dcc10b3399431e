// What the operator's job reconciler asks of the coordinator: register a job (or apply an edit
// to it), forget it, tell its trainers to stop, and read where its training stands. The
// CoordinatorService implements it; a reconciler unit test gives a recording fake instead, the
// way controller-runtime tests a reconciler against a fake client.
#pragma once

#include <optional>
#include <string>

#include "common/result.h"
#include "fulcrum/v1/coordinator.pb.h"
#include "operator/coordinator/job_session_config.h"
#include "operator/coordinator/job_session_snapshot.h"

namespace fulcrum::coordinator {

class JobRegistry {
 public:
  virtual ~JobRegistry() = default;

  // Registers a job; for a known one, applies the configuration in place.
  virtual Status AddJob(JobSessionConfig config) = 0;
  virtual bool HasJob(const std::string& name) const = 0;
  virtual Status RemoveJob(const std::string& name) = 0;
  virtual Status SendControl(const std::string& job, fulcrum::v1::Control::Action action,
                             const std::string& reason) = 0;
  virtual std::optional<JobSessionSnapshot> SnapshotOf(const std::string& name) const = 0;
};

}  // namespace fulcrum::coordinator
