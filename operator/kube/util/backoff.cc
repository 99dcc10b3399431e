#include "operator/kube/util/backoff.h"

#include <algorithm>

namespace fulcrum::kube {

std::chrono::milliseconds Jitter(std::chrono::milliseconds d, double max_factor,
                                 std::mt19937_64& random) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return std::chrono::milliseconds(
      static_cast<long long>(static_cast<double>(d.count()) * (1.0 + max_factor * unit(random))));
}

Backoff::Backoff(BackoffPolicy policy)
    : policy_(policy), current_(policy.initial), random_(std::random_device{}()) {}

std::chrono::milliseconds Backoff::Next() {
  const std::chrono::milliseconds wait = Jitter(current_, policy_.jitter, random_);
  current_ = std::min(policy_.max, std::chrono::milliseconds(static_cast<long long>(
                                       static_cast<double>(current_.count()) * policy_.factor)));
  return std::min(wait, policy_.max);
}

}  // namespace fulcrum::kube
