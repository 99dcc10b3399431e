// Batch-size dither: while a worker's a and k cannot yet be told apart (all its steps ran at
// about the same batch), nudge its batch up and down by a few percent. Workers are paired so
// one's +d is the other's −d and the global batch stays exact. Deterministic in its inputs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace fulcrum::balancer {

struct DitherRequest {
  std::span<const int> batches;            // the plan's batches
  std::span<const int> min_batches;        // per worker, same order
  std::span<const int> max_batches;        // per worker, per optimizer step
  std::span<const int> workers_to_dither;  // indices into batches
  int64_t step = 0;
  uint64_t seed = 0;
  double fraction = 0.1;  // amplitude relative to the smaller batch of a pair, at least 1
  int period_steps = 2;   // steps between sign flips
};

// The batches to run at `step`: the plan plus the dither; same sum, within the bounds.
std::vector<int> DitherBatches(const DitherRequest& request);

}  // namespace fulcrum::balancer
