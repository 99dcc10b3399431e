// Per-worker memory cap M: the largest micro-batch whose peak memory m0 + m1·b stays under
// the headroom share (90%) of the GPU, lowered at once and for good when the worker runs out
// of memory.
#pragma once

#include <cstdint>
#include <limits>

#include "operator/balancer/weighted_line_fit.h"

namespace fulcrum::balancer {

class MemoryModel {
 public:
  // capacity_bytes: GPU memory, 0 if unknown (then only the user cap and OOMs limit M).
  // user_max_batch: the spec's cap, 0 for none.
  MemoryModel(int64_t capacity_bytes, int user_max_batch, double headroom = 0.9);

  void ObservePeak(int micro_batch, int64_t peak_bytes);
  void ObserveOutOfMemory(int micro_batch);

  // M; std::numeric_limits<int>::max() when nothing limits the batch yet.
  int MaxBatch() const;

 private:
  int64_t capacity_bytes_;
  int user_max_batch_;
  double headroom_;
  WeightedLineFit peaks_;
  int largest_fitting_batch_ = 0;  // largest batch seen to peak within the headroom
  int out_of_memory_cap_ = std::numeric_limits<int>::max();
};

}  // namespace fulcrum::balancer
