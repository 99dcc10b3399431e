#include "common/backoff.h"

#include <algorithm>
#include <cmath>

namespace fulcrum {

std::chrono::nanoseconds BackoffPolicy::DelayAt(int step) const {
  const double delay = static_cast<double>(initial.count()) *
                       std::pow(factor, static_cast<double>(std::max(0, step)));
  if (!(delay < static_cast<double>(max.count()))) return max;
  return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(delay));
}

std::chrono::nanoseconds Jittered(std::chrono::nanoseconds delay, double low, double high,
                                  std::mt19937_64& random) {
  if (!(high > low))
    return std::chrono::nanoseconds(
        static_cast<std::int64_t>(static_cast<double>(delay.count()) * low));
  std::uniform_real_distribution<double> scale(low, high);
  return std::chrono::nanoseconds(
      static_cast<std::int64_t>(static_cast<double>(delay.count()) * scale(random)));
}

Backoff::Backoff(BackoffPolicy policy, std::uint64_t seed) : policy_(policy), random_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  const std::chrono::nanoseconds delay = policy_.DelayAt(step_);
  // Stop counting once at the cap: further steps change nothing and the count stays bounded.
  if (delay < policy_.max) ++step_;
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      std::min(Jittered(delay, policy_.jitter_low, policy_.jitter_high, random_), policy_.max));
}

}  // namespace fulcrum
