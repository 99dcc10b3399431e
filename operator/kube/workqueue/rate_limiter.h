// How long a work-queue key waits before it is retried: client-go's
// workqueue rate limiters. Per-item exponential backoff makes one failing key
// back off; the overall token bucket caps the retry rate of all keys together.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/backoff.h"
#include "operator/kube/util/clock.h"
#include "operator/kube/util/clocked_token_bucket.h"

namespace fulcrum::kube {

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  // The delay before `key` may be processed again; counts a failure.
  virtual Clock::Duration When(const std::string& key) = 0;
  // `key` succeeded: forget its failures.
  virtual void Forget(const std::string& key) = 0;
  virtual int NumRequeues(const std::string& key) = 0;
};

// base * 2^failures, capped at `max`.
class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  ItemExponentialRateLimiter(Clock::Duration base, Clock::Duration max)
      : policy_{.initial = base, .max = max} {}
  Clock::Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  const BackoffPolicy policy_;
  std::mutex mutex_;
  std::unordered_map<std::string, int> failures_;
};

// One token bucket for all keys: the overall retry rate.
class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, std::shared_ptr<const Clock> clock = SystemClock())
      : bucket_(qps, burst, std::move(clock)) {}
  Clock::Duration When(const std::string&) override { return bucket_.Reserve(); }
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  ClockedTokenBucket bucket_;
};

// The longest delay of several limiters.
class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
      : limiters_(std::move(limiters)) {}
  Clock::Duration When(const std::string& key) override;
  void Forget(const std::string& key) override;
  int NumRequeues(const std::string& key) override;

 private:
  std::vector<std::unique_ptr<RateLimiter>> limiters_;
};

// client-go's DefaultControllerRateLimiter: 5ms * 2^n up to 1000s per item,
// and 10 qps with a burst of 100 overall.
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(
    std::shared_ptr<const Clock> clock = SystemClock());

}  // namespace fulcrum::kube
