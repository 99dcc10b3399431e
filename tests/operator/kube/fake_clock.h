// A clock that moves only when the test says so. Waiters poll it briefly in
// real time, so Advance() wakes them within a millisecond or so.
#pragma once

#include <atomic>
#include <thread>

#include "operator/kube/util/clock.h"

namespace fulcrum::kube::testing {

class FakeClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(Duration(now_.load())); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(Duration(now_.load())));
  }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline) const override {
    if (Now() >= deadline) return;
    cv.wait_for(lock, std::chrono::milliseconds(1));
  }
  bool SleepUntil(TimePoint deadline, std::stop_token stop) const override {
    while (Now() < deadline) {
      if (stop.stop_requested()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return !stop.stop_requested();
  }

  void Advance(Duration by) { now_ += by.count(); }

 private:
  std::atomic<Duration::rep> now_{Duration(std::chrono::hours(1)).count()};
};

}  // namespace fulcrum::kube::testing
