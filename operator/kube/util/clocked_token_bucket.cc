#include "operator/kube/util/clocked_token_bucket.h"

namespace fulcrum::kube {

ClockedTokenBucket::ClockedTokenBucket(double qps, int burst, std::shared_ptr<const Clock> clock)
    : clock_(std::move(clock)), bucket_(qps, burst, clock_->Now()) {}

bool ClockedTokenBucket::TryAccept() {
  std::lock_guard lock(mutex_);
  return bucket_.TryTake(clock_->Now());
}

bool ClockedTokenBucket::IsFull() {
  std::lock_guard lock(mutex_);
  return bucket_.IsFull(clock_->Now());
}

Clock::Duration ClockedTokenBucket::Reserve() {
  std::lock_guard lock(mutex_);
  return bucket_.Reserve(clock_->Now());
}

bool ClockedTokenBucket::Accept(std::stop_token stop) {
  const Clock::Duration delay = Reserve();
  if (delay <= Clock::Duration::zero()) return true;
  return clock_->SleepFor(delay, std::move(stop));
}

}  // namespace fulcrum::kube
