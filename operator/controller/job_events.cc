#include "operator/controller/job_events.h"

#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include <cstdio>

namespace fulcrum::controller {

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

EventNote InvalidSpecEvent(const std::string& message) {
  return {true, "InvalidSpec", "Validate", message};
}

EventNote WorkerFailedEvent(const std::string& pod, std::size_t failures, int backoff_limit) {
  return {true, "WorkerFailed", "Replace",
          "worker pod " + pod + " failed; replacing it after back-off (" +
              std::to_string(failures) + " of at most " + std::to_string(backoff_limit) +
              " failures)"};
}

EventNote WorkerLostEvent(const std::string& pod) {
  return {true, "WorkerLost", "Remove",
          "worker pod " + pod +
              " removed: its node is gone or NotReady; the others go on in a new membership "
              "generation"};
}

EventNote ScaledDownEvent(const std::string& pod, int max_replicas) {
  return {false, "ScaledDown", "Drain",
          "worker pod " + pod + " drained: spec.replicas.max is " + std::to_string(max_replicas) +
              "; the others keep running"};
}

EventNote WorkerReleasedEvent(const std::string& pod, const std::string& node,
                              const std::string& gpu_product, double predicted_gain) {
  return {false, "WorkerReleased", "Release",
          "worker pod " + pod + " on " + node + " (" + gpu_product +
              ") released: the best split gives it nothing, its GPU cannot make the job faster "
              "(going on without it saves a predicted " +
              Percent(predicted_gain) + " of step time); the job takes no new worker on that node"};
}

EventNote StopTimedOutEvent(const std::string& pod, int grace_seconds) {
  return {true, "StopTimedOut", "Suspend",
          "worker pod " + pod + " did not stop after its checkpoint within " +
              std::to_string(grace_seconds) + " s; deleted"};
}

EventNote CreatedWorkersEvent(const std::vector<std::string>& pods) {
  return {false, "CreatedWorker", "Create",
          (pods.size() == 1 ? "created worker pod " : "created worker pods ") +
              absl::StrJoin(pods, ", ")};
}

EventNote FailedCreateEvent(const std::string& pod, const std::string& error) {
  return {true, "FailedCreate", "Create", "cannot create worker pod " + pod + ": " + error};
}

EventNote StartedEvent(int ready_workers) {
  return {false, "Started", "Train", std::to_string(ready_workers) + " workers training"};
}

EventNote SuspendedEvent() {
  return {false, "Suspended", "Suspend",
          "spec.suspend is true: trainers checkpoint and their pods are deleted"};
}

EventNote SucceededEvent(int64_t steps) {
  return {false, "Succeeded", "Complete", "trained " + std::to_string(steps) + " steps"};
}

EventNote FailedEvent(const std::string& reason, const std::string& message) {
  return {true, reason, "Fail", message};
}

EventNote DataBoundEvent(const std::string& message) {
  return {true, "DataBound", "Train", message};
}

EventNote StorageNotSharedEvent(const std::string& problems) {
  return {true, "StorageNotShared", "Validate", problems};
}

EventNote RebalancedEvent(int64_t apply_at_step, const std::string& reason, double predicted_gain) {
  std::string note = "step " + std::to_string(apply_at_step) + ": " + reason;
  if (predicted_gain > 0) note += " (predicted gain " + Percent(predicted_gain) + ")";
  return {false, "Rebalanced", "Rebalance", note};
}

EventNote GlobalBatchChangedEvent(int64_t step, int from, int to, double learning_rate,
                                  const std::string& reason) {
  std::string note = "after step " + std::to_string(step) + ": global batch " +
                     std::to_string(from) + " -> " + std::to_string(to);
  if (learning_rate > 0) note += ", learning rate " + absl::StrFormat("%.4g", learning_rate);
  return {false, "GlobalBatchChanged", "Rebalance", note + " (" + reason + ")"};
}

EventNote MembershipChangedEvent(int64_t generation, int64_t step, const std::string& reason,
                                 const std::vector<int>& batches) {
  return {false, "MembershipChanged", "Rebalance",
          "step " + std::to_string(step) + ": membership generation " + std::to_string(generation) +
              " (" + reason + "): " + std::to_string(batches.size()) +
              (batches.size() == 1 ? " worker" : " workers") + ", local batches " +
              absl::StrJoin(batches, "/")};
}

EventNote UnsupportedGpusEvent(const std::map<std::string, int>& products, const std::string& image,
                               int minimum) {
  const auto capability = [](int value) {
    return std::to_string(value / 10) + "." + std::to_string(value % 10);
  };
  std::vector<std::string> named;
  for (const auto& [product, value] : products) {
    named.push_back(product + " (compute capability " + capability(value) + ")");
  }
  return {true, "GpuNotSupported", "Place",
          "no worker goes to " + absl::StrJoin(named, ", ") + ": the CUDA trainer image " + image +
              " has kernels for compute capability " + capability(minimum) +
              " and newer only; deny these products in spec.gpuSelector, or set a trainer image "
              "built for them (docs/install.md, \"GPUs and images\")"};
}

EventNote ExpiredEvent(int64_t ttl_seconds) {
  return {false, "Expired", "Delete",
          "deleting the job: spec.ttlSecondsAfterFinished (" + std::to_string(ttl_seconds) +
              " s) has passed since it finished"};
}

}  // namespace fulcrum::controller
