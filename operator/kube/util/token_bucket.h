// A token bucket: `qps` tokens per second, holding at most `burst`. The same
// limiter as client-go's flowcontrol.NewTokenBucketRateLimiter and Go's
// rate.Limiter, used for client-side request QPS, the work queue's overall
// rate and the event recorder's spam filter.
#pragma once

#include <memory>
#include <mutex>
#include <stop_token>

#include "operator/kube/util/clock.h"

namespace fulcrum::kube {

class TokenBucket {
 public:
  // qps <= 0 means unlimited.
  TokenBucket(double qps, int burst, std::shared_ptr<const Clock> clock = SystemClock());

  // Takes a token if one is available now.
  bool TryAccept();
  // Takes a token, possibly one not yet refilled, and returns how long the
  // caller must wait before using it (zero if available now). Like
  // rate.Limiter.Reserve().Delay(): reservations queue up in order.
  Clock::Duration Reserve();
  // Reserves and sleeps for the delay; false if `stop` was requested first.
  bool Accept(std::stop_token stop = {});

  double qps() const { return qps_; }
  // Refilled to `burst`: indistinguishable from a new bucket, so it can be forgotten.
  bool IsFull();

 private:
  void RefillLocked(Clock::TimePoint now);

  const double qps_;
  const double burst_;
  const std::shared_ptr<const Clock> clock_;
  std::mutex mutex_;
  double tokens_;  // may go negative: reservations not yet covered
  Clock::TimePoint last_refill_;
};

}  // namespace fulcrum::kube
