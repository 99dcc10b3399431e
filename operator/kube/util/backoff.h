// Exponential backoff with jitter for reconnecting (watch, leader election):
// each failure doubles the wait up to a cap, and a random factor spreads
// clients apart so that they do not all reconnect to a restarted API server
// at the same instant.
#pragma once

#include <chrono>
#include <random>

namespace fulcrum::kube {

struct BackoffPolicy {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30'000};
  double factor = 2.0;
  double jitter = 1.0;  // the wait is d * (1 + jitter * uniform[0,1)), as in wait.Jitter
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy = {});

  // The wait before the next attempt; grows with each call.
  std::chrono::milliseconds Next();
  // After a success: start again from `initial`.
  void Reset() { current_ = policy_.initial; }

 private:
  BackoffPolicy policy_;
  std::chrono::milliseconds current_;
  std::mt19937_64 random_;
};

// d * (1 + max_factor * uniform[0,1)).
std::chrono::milliseconds Jitter(std::chrono::milliseconds d, double max_factor,
                                 std::mt19937_64& random);

}  // namespace fulcrum::kube
