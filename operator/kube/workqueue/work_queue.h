// The queue between informer handlers and reconcile workers: client-go's
// rate-limited, delaying work queue. It holds keys, not objects:
// - a key added several times before a worker takes it is processed once;
// - a key is never handed to two workers at once: added while in flight, it
//   is marked dirty and queued again when the worker calls Done;
// - AddRateLimited re-adds a failed key after its backoff; Forget resets it;
// - ShutDown wakes all workers: Get returns what is still queued, then nullopt.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "operator/kube/util/clock.h"
#include "operator/kube/workqueue/rate_limiter.h"

namespace fulcrum::kube {

class WorkQueue {
 public:
  explicit WorkQueue(std::unique_ptr<RateLimiter> limiter = DefaultControllerRateLimiter(),
                     std::shared_ptr<const Clock> clock = SystemClock());

  void Add(const std::string& key);
  // Adds `key` once `delay` has passed (at the earliest of several requests).
  void AddAfter(const std::string& key, Clock::Duration delay);
  // Adds `key` after the rate limiter's delay for it (a retry).
  void AddRateLimited(const std::string& key);
  // `key` is done failing: reset its backoff.
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks for the next key; std::nullopt once shut down and drained.
  std::optional<std::string> Get();
  // The worker has finished `key` (successfully or not).
  void Done(const std::string& key);

  // No more adds; workers drain what is queued, then Get returns nullopt.
  // Pending delayed adds are dropped.
  void ShutDown();
  // ShutDown, then wait until every key handed out has been marked Done.
  void ShutDownWithDrain();
  bool ShuttingDown() const;

  // Keys ready to be handed out (not counting delayed or in-flight ones).
  std::size_t Len();

 private:
  void AddLocked(const std::string& key);
  // Moves delayed keys whose time has come into the queue.
  void PromoteDueLocked();

  std::unique_ptr<RateLimiter> limiter_;
  std::shared_ptr<const Clock> clock_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::string> queue_;               // order of processing
  std::unordered_set<std::string> dirty_;       // needs processing (queued, or re-added in flight)
  std::unordered_set<std::string> processing_;  // handed to a worker, not yet Done
  std::multimap<Clock::TimePoint, std::string> delayed_;             // ready time -> key
  std::unordered_map<std::string, Clock::TimePoint> delayed_until_;  // key -> ready time
  bool shutting_down_ = false;
};

}  // namespace fulcrum::kube
