// Loads the next steps' batches ahead, on loader threads, while the current step computes. The
// indices of the coming steps are known (the plan, the cursor and the epoch's permutation), so
// the training loop says which batches it will want; a pool of threads gathers their samples
// (pinned host memory on a GPU) and copies them to the device on a stream of their own. A
// rebalance or membership change makes the loop want other ranges: loads that no longer match
// are dropped, and only the new ranges are fetched. Take() returns a batch on the device and how
// long the loop waited for it, which is reported as data wait, never as compute.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "trainer_image/trainer/data/dataset.h"
#include "trainer_image/trainer/data/sample_order.h"
#include "trainer_image/trainer/device/compute_device.h"

namespace fulcrum::trainer {

// One rank's samples of one step: global positions and the sample indices at them.
struct BatchRequest {
  PositionRange range;
  std::vector<int64_t> indices;
};

struct LoadedBatch {
  Batch batch;                // every field on the compute device, ready to use
  double wait_seconds = 0.0;  // how long Take waited for it (loading, copying)
};

class BatchLoader {
 public:
  // threads 0: no prefetching; Take loads on the caller's thread.
  BatchLoader(Dataset& dataset, ComputeDevice& device, int threads);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The batches the next steps will take, soonest first. Loads of other ranges are dropped.
  void Prefetch(std::vector<BatchRequest> wanted);
  // The batch of `request`: prefetched, in flight, or loaded now. Rethrows a load's error.
  LoadedBatch Take(const BatchRequest& request);

  // Loads started so far (prefetched or not) and loads dropped unused: for tests and logs.
  int64_t loads_started() const;
  int64_t loads_dropped() const;
  // CPU time the loader threads have used (so the emulated slowdown can leave it out).
  double cpu_seconds() const;

 private:
  struct Slot {
    BatchRequest request;
    bool started = false;
    bool done = false;
    DeviceBatch batch;
    std::exception_ptr error;
  };
  void Work(std::stop_token stop);
  DeviceBatch Load(const BatchRequest& request) const;
  static bool Same(const PositionRange& a, const PositionRange& b) {
    return a.begin == b.begin && a.end == b.end;
  }

  Dataset& dataset_;
  ComputeDevice& device_;
  mutable std::mutex mutex_;
  std::condition_variable_any changed_;
  std::deque<std::shared_ptr<Slot>> slots_;  // wanted, soonest first
  int64_t started_ = 0;
  int64_t dropped_ = 0;
  double cpu_seconds_ = 0.0;
  std::vector<std::jthread> threads_;  // last: they stop and join before the rest goes
};

}  // namespace fulcrum::trainer
