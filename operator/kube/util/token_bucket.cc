#include "operator/kube/util/token_bucket.h"

#include <algorithm>

namespace fulcrum::kube {

TokenBucket::TokenBucket(double qps, int burst, std::shared_ptr<const Clock> clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(std::move(clock)),
      tokens_(burst_),
      last_refill_(clock_->Now()) {}

void TokenBucket::RefillLocked(Clock::TimePoint now) {
  const double elapsed = std::chrono::duration<double>(now - last_refill_).count();
  if (elapsed > 0) tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
  last_refill_ = std::max(last_refill_, now);
}

bool TokenBucket::TryAccept() {
  if (qps_ <= 0) return true;
  std::lock_guard lock(mutex_);
  RefillLocked(clock_->Now());
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

bool TokenBucket::IsFull() {
  if (qps_ <= 0) return true;
  std::lock_guard lock(mutex_);
  RefillLocked(clock_->Now());
  return tokens_ >= burst_;
}

Clock::Duration TokenBucket::Reserve() {
  if (qps_ <= 0) return Clock::Duration::zero();
  std::lock_guard lock(mutex_);
  RefillLocked(clock_->Now());
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::Duration::zero();
  return std::chrono::duration_cast<Clock::Duration>(
      std::chrono::duration<double>(-tokens_ / qps_));
}

bool TokenBucket::Accept(std::stop_token stop) {
  const Clock::Duration delay = Reserve();
  if (delay <= Clock::Duration::zero()) return true;
  return clock_->SleepFor(delay, std::move(stop));
}

}  // namespace fulcrum::kube
