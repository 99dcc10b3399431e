#include "trainer_image/trainer/data/batch_loader.h"

#include <algorithm>
#include <chrono>
#include <ctime>

namespace fulcrum::trainer {
namespace {

double ThreadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

}  // namespace

BatchLoader::BatchLoader(Dataset& dataset, ComputeDevice& device, int threads)
    : dataset_(dataset), device_(device) {
  for (int i = 0; i < threads; ++i)
    threads_.emplace_back([this](std::stop_token stop) { Work(stop); });
}

BatchLoader::~BatchLoader() {
  for (std::jthread& thread : threads_) thread.request_stop();
  changed_.notify_all();
}

DeviceBatch BatchLoader::Load(const BatchRequest& request) const {
  Batch host = dataset_.Get(request.indices);
  return device_.StageOnDevice(host.fields);
}

void BatchLoader::Work(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (true) {
    std::shared_ptr<Slot> slot;
    changed_.wait(lock, stop, [&] {
      auto next = std::find_if(slots_.begin(), slots_.end(),
                               [](const std::shared_ptr<Slot>& s) { return !s->started; });
      if (next == slots_.end()) return false;
      slot = *next;
      return true;
    });
    if (stop.stop_requested()) return;
    slot->started = true;
    ++started_;
    lock.unlock();
    std::exception_ptr error;
    DeviceBatch batch;
    const double cpu_start = ThreadCpuSeconds();
    try {
      batch = Load(slot->request);
    } catch (...) {
      error = std::current_exception();
    }
    const double cpu_used = ThreadCpuSeconds() - cpu_start;
    lock.lock();
    cpu_seconds_ += cpu_used;
    slot->batch = std::move(batch);
    slot->error = error;
    slot->done = true;
    changed_.notify_all();
  }
}

void BatchLoader::Prefetch(std::vector<BatchRequest> wanted) {
  std::lock_guard lock(mutex_);
  std::deque<std::shared_ptr<Slot>> slots;
  for (BatchRequest& request : wanted) {
    auto kept = std::find_if(slots_.begin(), slots_.end(), [&](const std::shared_ptr<Slot>& s) {
      return Same(s->request.range, request.range);
    });
    if (kept != slots_.end()) {
      slots.push_back(*kept);
      slots_.erase(kept);
    } else {
      auto slot = std::make_shared<Slot>();
      slot->request = std::move(request);
      slots.push_back(std::move(slot));
    }
  }
  for (const std::shared_ptr<Slot>& unwanted : slots_) {
    if (unwanted->started) ++dropped_;
  }
  slots_ = std::move(slots);
  changed_.notify_all();
}

LoadedBatch BatchLoader::Take(const BatchRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  std::shared_ptr<Slot> slot;
  {
    std::unique_lock lock(mutex_);
    auto found = std::find_if(slots_.begin(), slots_.end(), [&](const std::shared_ptr<Slot>& s) {
      return Same(s->request.range, request.range);
    });
    if (found != slots_.end()) {
      if ((*found)->started) slot = *found;
      slots_.erase(found);
    }
    if (slot) {
      changed_.wait(lock, [&] { return slot->done; });
    } else {
      ++started_;  // never asked for, or not begun: loaded here, not behind later steps' loads
    }
  }
  if (!slot) {
    slot = std::make_shared<Slot>();
    slot->batch = Load(request);
  }
  if (slot->error) std::rethrow_exception(slot->error);
  device_.WaitStaged(slot->batch);
  LoadedBatch loaded;
  loaded.batch = {slot->batch.tensors};
  loaded.wait_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loaded;
}

int64_t BatchLoader::loads_started() const {
  std::lock_guard lock(mutex_);
  return started_;
}

double BatchLoader::cpu_seconds() const {
  std::lock_guard lock(mutex_);
  return cpu_seconds_;
}

int64_t BatchLoader::loads_dropped() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

}  // namespace fulcrum::trainer
