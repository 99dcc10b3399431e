#include "operator/kube/workqueue/work_queue.h"

namespace fulcrum::kube {

WorkQueue::WorkQueue(std::unique_ptr<RateLimiter> limiter, std::shared_ptr<const Clock> clock)
    : limiter_(std::move(limiter)), clock_(std::move(clock)) {}

void WorkQueue::AddLocked(const std::string& key) {
  if (shutting_down_ || dirty_.contains(key)) return;
  dirty_.insert(key);
  // In flight: Done will queue it again, so that no two workers hold it.
  if (processing_.contains(key)) return;
  queue_.push_back(key);
  changed_.notify_one();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mutex_);
  AddLocked(key);
}

void WorkQueue::AddAfter(const std::string& key, Clock::Duration delay) {
  if (delay <= Clock::Duration::zero()) return Add(key);
  std::lock_guard lock(mutex_);
  if (shutting_down_) return;
  const Clock::TimePoint ready = clock_->Now() + delay;
  if (const auto it = delayed_until_.find(key); it != delayed_until_.end()) {
    if (it->second <= ready) return;  // already due sooner
    auto [first, last] = delayed_.equal_range(it->second);
    for (auto entry = first; entry != last; ++entry) {
      if (entry->second == key) {
        delayed_.erase(entry);
        break;
      }
    }
  }
  delayed_until_[key] = ready;
  delayed_.emplace(ready, key);
  // A waiting worker may need to wake earlier than it planned.
  changed_.notify_all();
}

void WorkQueue::AddRateLimited(const std::string& key) {
  AddAfter(key, limiter_->When(key));
}

void WorkQueue::Forget(const std::string& key) {
  limiter_->Forget(key);
}

int WorkQueue::NumRequeues(const std::string& key) {
  return limiter_->NumRequeues(key);
}

void WorkQueue::PromoteDueLocked() {
  const Clock::TimePoint now = clock_->Now();
  while (!delayed_.empty() && delayed_.begin()->first <= now) {
    const std::string key = delayed_.begin()->second;
    delayed_.erase(delayed_.begin());
    delayed_until_.erase(key);
    AddLocked(key);
  }
}

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mutex_);
  while (true) {
    PromoteDueLocked();
    if (!queue_.empty()) break;
    if (shutting_down_) return std::nullopt;
    if (delayed_.empty()) {
      changed_.wait(lock);
    } else {
      clock_->WaitUntil(lock, changed_, delayed_.begin()->first);
    }
  }
  std::string key = std::move(queue_.front());
  queue_.pop_front();
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mutex_);
  processing_.erase(key);
  if (dirty_.contains(key)) {
    queue_.push_back(key);
    changed_.notify_one();
  }
  if (processing_.empty()) changed_.notify_all();  // ShutDownWithDrain may be waiting
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mutex_);
  shutting_down_ = true;
  delayed_.clear();
  delayed_until_.clear();
  changed_.notify_all();
}

void WorkQueue::ShutDownWithDrain() {
  ShutDown();
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return processing_.empty(); });
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard lock(mutex_);
  return shutting_down_;
}

std::size_t WorkQueue::Len() {
  std::lock_guard lock(mutex_);
  PromoteDueLocked();
  return queue_.size();
}

}  // namespace fulcrum::kube
