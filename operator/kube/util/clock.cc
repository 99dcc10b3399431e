#include "operator/kube/util/clock.h"

namespace fulcrum::kube {
namespace {

class RealClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override {
    return std::chrono::system_clock::now();
  }
  void WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                 TimePoint deadline) const override {
    cv.wait_until(lock, deadline);
  }
  bool SleepUntil(TimePoint deadline, std::stop_token stop) const override {
    std::mutex mutex;
    std::condition_variable_any wake;
    std::unique_lock lock(mutex);
    // Nothing notifies `wake`: it returns at the deadline or when stop is requested.
    wake.wait_until(lock, stop, deadline, [] { return false; });
    return !stop.stop_requested();
  }
};

}  // namespace

std::shared_ptr<const Clock> SystemClock() {
  static const auto clock = std::make_shared<const RealClock>();
  return clock;
}

}  // namespace fulcrum::kube
