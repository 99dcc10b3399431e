#include "operator/balancer/plan_validation.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_set>

namespace fulcrum::balancer {
namespace {

std::string WorkerField(std::size_t index, const char* name) {
  return "workers[" + std::to_string(index) + "]." + name;
}

Status ValidateWorker(const WorkerSpec& worker, std::size_t index) {
  if (worker.id.empty()) return InvalidArgument(WorkerField(index, "id"), "must not be empty");
  if (!std::isfinite(worker.fixed_seconds) || worker.fixed_seconds < 0.0) {
    return InvalidArgument(WorkerField(index, "fixed_seconds"), "must be a finite number >= 0");
  }
  if (!std::isfinite(worker.seconds_per_sample) || worker.seconds_per_sample <= 0.0) {
    return InvalidArgument(WorkerField(index, "seconds_per_sample"), "must be a finite number > 0");
  }
  if (worker.min_batch < 0) {
    return InvalidArgument(WorkerField(index, "min_batch"), "must be an integer >= 0");
  }
  if (worker.max_batch < worker.min_batch) {
    return InvalidArgument(WorkerField(index, "max_batch"),
                           "must be >= min_batch (" + std::to_string(worker.min_batch) + ")");
  }
  for (const CostPoint& point : worker.measured) {
    if (point.batch < 1 || !std::isfinite(point.seconds) || point.seconds <= 0.0) {
      return InvalidArgument(WorkerField(index, "measured"),
                             "every point needs a batch >= 1 and a finite time > 0");
    }
  }
  if (worker.current_batch < 0) {
    return InvalidArgument(WorkerField(index, "current_batch"), "must be an integer >= 0");
  }
  return Ok();
}

}  // namespace

Status ValidatePlanRequest(const PlanRequest& request) {
  if (request.global_batch < 1) {
    return InvalidArgument("global_batch", "must be an integer >= 1");
  }
  if (request.workers.empty()) {
    return InvalidArgument("workers", "must list at least one worker");
  }
  if (!std::isfinite(request.tail_seconds) || request.tail_seconds < 0.0) {
    return InvalidArgument("tail_seconds", "must be a finite number >= 0");
  }
  std::unordered_set<std::string> ids;
  int64_t min_sum = 0;
  int64_t max_sum = 0;
  for (std::size_t i = 0; i < request.workers.size(); ++i) {
    const WorkerSpec& worker = request.workers[i];
    if (Status status = ValidateWorker(worker, i); !status.ok()) return status;
    if (!ids.insert(worker.id).second) {
      return InvalidArgument(WorkerField(i, "id"), "duplicate id \"" + worker.id + "\"");
    }
    min_sum += worker.min_batch;
    max_sum += worker.max_batch;
  }
  if (min_sum > request.global_batch) {
    return Error{ErrorCode::kInfeasible,
                 "the minimum batches add up to " + std::to_string(min_sum) +
                     ", more than global_batch " + std::to_string(request.global_batch) +
                     ": lower min_batch or raise global_batch",
                 "workers[].min_batch"};
  }
  if (max_sum == 0) {
    return Error{ErrorCode::kInfeasible, "no worker can hold a sample: raise max_batch",
                 "workers[].max_batch"};
  }
  if (max_sum < request.global_batch && !request.allow_accumulation) {
    return Error{ErrorCode::kInfeasible,
                 "the maximum batches add up to " + std::to_string(max_sum) +
                     ", less than global_batch " + std::to_string(request.global_batch) +
                     ": enable accumulation, add workers or lower global_batch",
                 "workers[].max_batch"};
  }
  return Ok();
}

}  // namespace fulcrum::balancer
