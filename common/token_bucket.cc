#include "common/token_bucket.h"

#include <algorithm>

namespace fulcrum {

TokenBucket::TokenBucket(double per_second, double burst, TimePoint now)
    : per_second_(per_second), burst_(std::max(1.0, burst)), tokens_(burst_), last_refill_(now) {}

void TokenBucket::Refill(TimePoint now) {
  const double elapsed = std::chrono::duration<double>(now - last_refill_).count();
  if (elapsed > 0) tokens_ = std::min(burst_, tokens_ + elapsed * per_second_);
  last_refill_ = std::max(last_refill_, now);
}

bool TokenBucket::TryTake(TimePoint now) {
  if (per_second_ <= 0) return true;
  Refill(now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

TokenBucket::Duration TokenBucket::Reserve(TimePoint now) {
  if (per_second_ <= 0) return Duration::zero();
  Refill(now);
  tokens_ -= 1;
  if (tokens_ >= 0) return Duration::zero();
  return std::chrono::duration_cast<Duration>(
      std::chrono::duration<double>(-tokens_ / per_second_));
}

bool TokenBucket::IsFull(TimePoint now) {
  if (per_second_ <= 0) return true;
  Refill(now);
  return tokens_ >= burst_;
}

}  // namespace fulcrum
