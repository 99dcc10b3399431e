// A token bucket: `per_second` tokens a second, holding at most `burst`: the limiter of
// client-go's flowcontrol.NewTokenBucketRateLimiter and Go's rate.Limiter. The one rate limit
// of Fulcrum: the API client's requests, the work queue's overall retry rate, the event
// recorder's spam filter and the coordinator's limit on the re-formations one pod forces.
// Pure: the caller says what time it is (a clock of its own, or the time of the event it
// handles), and locks where threads share one.
#pragma once

#include <chrono>

namespace fulcrum {

class TokenBucket {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  // Full at `now`. per_second <= 0 means unlimited; burst is at least 1.
  TokenBucket(double per_second, double burst, TimePoint now);

  // Takes a token if one is there at `now`.
  bool TryTake(TimePoint now);
  // Takes a token, possibly one not yet refilled, and returns how long after `now` it may be
  // used (zero if at once). Like rate.Limiter.Reserve().Delay(): reservations queue in order.
  Duration Reserve(TimePoint now);
  // Refilled to `burst`: indistinguishable from a new bucket, so it can be forgotten.
  bool IsFull(TimePoint now);

 private:
  void Refill(TimePoint now);

  double per_second_;
  double burst_;
  double tokens_;  // may go negative: reservations not yet covered
  TimePoint last_refill_;
};

}  // namespace fulcrum
