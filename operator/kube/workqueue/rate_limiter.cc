#include "operator/kube/workqueue/rate_limiter.h"

#include <algorithm>

namespace fulcrum::kube {

Clock::Duration ItemExponentialRateLimiter::When(const std::string& key) {
  std::lock_guard lock(mutex_);
  return policy_.DelayAt(failures_[key]++);
}

void ItemExponentialRateLimiter::Forget(const std::string& key) {
  std::lock_guard lock(mutex_);
  failures_.erase(key);
}

int ItemExponentialRateLimiter::NumRequeues(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = failures_.find(key);
  return it == failures_.end() ? 0 : it->second;
}

Clock::Duration MaxOfRateLimiter::When(const std::string& key) {
  Clock::Duration longest = Clock::Duration::zero();
  for (auto& limiter : limiters_) longest = std::max(longest, limiter->When(key));
  return longest;
}

void MaxOfRateLimiter::Forget(const std::string& key) {
  for (auto& limiter : limiters_) limiter->Forget(key);
}

int MaxOfRateLimiter::NumRequeues(const std::string& key) {
  int most = 0;
  for (auto& limiter : limiters_) most = std::max(most, limiter->NumRequeues(key));
  return most;
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(std::shared_ptr<const Clock> clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(std::make_unique<ItemExponentialRateLimiter>(std::chrono::milliseconds(5),
                                                                  std::chrono::seconds(1000)));
  limiters.push_back(std::make_unique<BucketRateLimiter>(10, 100, std::move(clock)));
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

}  // namespace fulcrum::kube
