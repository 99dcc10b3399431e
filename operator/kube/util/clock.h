// Time behind an interface, so that rate limiters, backoff and the work queue
// can be tested with a fake clock instead of sleeping.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>

namespace fulcrum::kube {

class Clock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  using Duration = std::chrono::steady_clock::duration;

  virtual ~Clock() = default;
  // Monotonic time, for deadlines and intervals.
  virtual TimePoint Now() const = 0;
  // Wall-clock time, for timestamps written to the API server (Lease, Event).
  virtual std::chrono::system_clock::time_point WallNow() const = 0;
  // Blocks on `cv` (whose mutex `lock` holds) until notified or until `deadline`
  // by this clock. May wake early; callers re-check their condition in a loop.
  virtual void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                         TimePoint deadline) const = 0;
  // Sleeps until `deadline`; returns false at once if `stop` is requested.
  virtual bool SleepUntil(TimePoint deadline, std::stop_token stop) const = 0;

  bool SleepFor(Duration duration, std::stop_token stop) const {
    return SleepUntil(Now() + duration, std::move(stop));
  }
};

// The process's real clocks. Stateless, so one shared instance serves everyone.
std::shared_ptr<const Clock> SystemClock();

}  // namespace fulcrum::kube
