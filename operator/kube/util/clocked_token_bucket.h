// fulcrum::TokenBucket on a kube Clock, shared between threads: client-side request QPS (callers
// wait for their token), the work queue's overall rate and the event recorder's spam filter.
#pragma once

#include <memory>
#include <mutex>
#include <stop_token>

#include "common/token_bucket.h"
#include "operator/kube/util/clock.h"

namespace fulcrum::kube {

class ClockedTokenBucket {
 public:
  // qps <= 0 means unlimited.
  ClockedTokenBucket(double qps, int burst, std::shared_ptr<const Clock> clock = SystemClock());

  // Takes a token if one is available now.
  bool TryAccept();
  // Takes a token, possibly one not yet refilled, and returns how long the caller must wait
  // before using it (zero if available now).
  Clock::Duration Reserve();
  // Reserves and sleeps for the delay; false if `stop` was requested first.
  bool Accept(std::stop_token stop = {});

  // Refilled to `burst`: indistinguishable from a new bucket, so it can be forgotten.
  bool IsFull();

 private:
  const std::shared_ptr<const Clock> clock_;
  std::mutex mutex_;
  TokenBucket bucket_;
};

}  // namespace fulcrum::kube
