// The wording of every Event the job reconciler records, in one place: what a user reads in
// `kubectl describe htj` and `kubectl get events` (docs/operator.md lists the reasons). Pure:
// facts in, an Event's reason, action and note out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::controller {

struct EventNote {
  bool warning = false;
  std::string reason;  // CamelCase, stable: alerts and tests match on it
  std::string action;  // what the operator did about it
  std::string note;    // for people
  bool operator==(const EventNote&) const = default;
};

// "12.5%": a fraction as a percentage with one decimal.
std::string Percent(double fraction);

EventNote InvalidSpecEvent(const std::string& message);
EventNote WorkerFailedEvent(const std::string& pod, std::size_t failures, int backoff_limit);
EventNote WorkerLostEvent(const std::string& pod);
EventNote ScaledDownEvent(const std::string& pod, int max_replicas);
EventNote WorkerReleasedEvent(const std::string& pod, const std::string& node,
                              const std::string& gpu_product, double predicted_gain);
EventNote StopTimedOutEvent(const std::string& pod, int grace_seconds);
// One Event for every pod one reconcile created.
EventNote CreatedWorkersEvent(const std::vector<std::string>& pods);
EventNote FailedCreateEvent(const std::string& pod, const std::string& error);
EventNote StartedEvent(int ready_workers);
EventNote SuspendedEvent();
EventNote SucceededEvent(int64_t steps);
EventNote FailedEvent(const std::string& reason, const std::string& message);
EventNote DataBoundEvent(const std::string& message);
EventNote StorageNotSharedEvent(const std::string& problems);
EventNote RebalancedEvent(int64_t apply_at_step, const std::string& reason, double predicted_gain);
// The adaptive global batch moved (spec.batching adaptive), with its learning rate.
EventNote GlobalBatchChangedEvent(int64_t step, int from, int to, double learning_rate,
                                  const std::string& reason);
// A new membership generation (workers joined, left or were lost) and its plan, as one Event:
// `batches` by rank, applied from `step`.
EventNote MembershipChangedEvent(int64_t generation, int64_t step, const std::string& reason,
                                 const std::vector<int>& batches);
EventNote ExpiredEvent(int64_t ttl_seconds);
// New workers go to none of `products` (product -> compute capability major*10+minor): `image`
// has no kernels below `minimum`.
EventNote UnsupportedGpusEvent(const std::map<std::string, int>& products, const std::string& image,
                               int minimum);

}  // namespace fulcrum::controller
