// Exponential back-off, the one every retry loop and failure count of Fulcrum uses: the API
// client's watches, the work queue's per-key retries, the controller's replacement of failed
// workers, the coordinator's retries to form a generation and its hang timeouts, the trainer's
// reconnects to the coordinator and fulcrum-local-node's crash-loop restarts.
// Pure: no clock (the caller waits), and randomness only from the generator it is given, so
// tests can pin every number.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace fulcrum {

struct BackoffPolicy {
  std::chrono::nanoseconds initial{0};
  std::chrono::nanoseconds max{0};  // no delay and no wait is longer, jitter included
  double factor = 2.0;
  // Each wait of a Backoff is its delay times a uniform draw from [jitter_low, jitter_high),
  // so that clients that failed together do not all retry at the same instant. 1 and 1: none.
  double jitter_low = 1.0;
  double jitter_high = 1.0;

  // initial * factor^step, at most max: the delay after `step` growths (step 0: initial).
  // Computed in floating point, so a long run of failures saturates at max, never overflows.
  std::chrono::nanoseconds DelayAt(int step) const;
};

// `delay` times a uniform draw from [low, high).
std::chrono::nanoseconds Jittered(std::chrono::nanoseconds delay, double low, double high,
                                  std::mt19937_64& random);

// A BackoffPolicy with its count of failures so far.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy, std::uint64_t seed = std::random_device{}());

  // The wait before the next attempt (jittered, at most max); the one after grows. In whole
  // milliseconds, the unit every waiter logs it in.
  std::chrono::milliseconds Next();
  // After a success: the next wait is `initial` again.
  void Reset() { step_ = 0; }

 private:
  BackoffPolicy policy_;
  int step_ = 0;
  std::mt19937_64 random_;
};

}  // namespace fulcrum
