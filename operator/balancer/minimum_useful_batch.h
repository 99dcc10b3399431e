// The smallest micro-batch worth giving one worker. Below some size a device runs a step no
// faster than a bigger one, or slower (CPU threads or GPU SMs left idle, fixed per-kernel
// costs that grow with fragmentation): measured on CPU, batch-1 steps were slower than
// batch-8 steps. The line c(b) = a + k·b cannot say so, and a planner trusting it may hand a
// slow worker batch 1 (issue 13: that round scored a higher η against the balancer's own fit
// and a lower throughput). Learned from the worker's own reports: a batch whose typical time
// is more than `margin` above that of a batch at least twice as big is pathological, and so is
// every smaller one and every unmeasured one up to the next size measured to be fine: the
// planner must not find out one size at a time, a step each. Pure; one per worker.
#pragma once

#include <array>
#include <cstdint>
#include <map>

namespace fulcrum::balancer {

struct MinimumUsefulBatchConfig {
  double margin = 1.1;               // beyond timing noise
  int min_observations = 3;          // per batch size, before its average counts
  std::size_t max_batch_sizes = 64;  // distinct sizes kept (the least recently seen go first)
};

class MinimumUsefulBatch {
 public:
  explicit MinimumUsefulBatch(MinimumUsefulBatchConfig config = {});

  // One micro-step of `micro_batch` samples took `seconds` (both > 0).
  void Observe(int micro_batch, double seconds);
  // The worker's speed changed (a regime change): what was measured no longer holds.
  void Reset();
  // 1 when no batch is known to be pathological.
  int Minimum() const { return minimum_; }
  // Whether `seconds` at `micro_batch` is off by more than the margin from that size's
  // typical time: the worker's speed changed. A size not measured before contradicts nothing
  // (a time that breaks the line there may be the device's small-batch behaviour).
  bool Contradicts(int micro_batch, double seconds) const;

 private:
  // The last kKept times of one size; their median is its typical time, which one pause (a
  // GC, a noisy neighbour) cannot move.
  static constexpr int kKept = 5;
  struct Average {
    std::array<double, kKept> seconds{};
    int count = 0;  // all observations, of which the last min(count, kKept) are kept
    uint64_t last_seen = 0;
    double typical = 0.0;  // the median of those kept, updated with each observation
  };
  void Recompute();

  MinimumUsefulBatchConfig config_;
  std::map<int, Average> by_batch_;
  uint64_t observations_ = 0;
  int minimum_ = 1;
};

}  // namespace fulcrum::balancer
