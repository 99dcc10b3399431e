// Which samples each rank trains on. The job walks one global stream of sample positions;
// position p belongs to epoch p / N and is sample EpochOrder(p / N)[p % N]. Step s consumes
// positions [cursor, cursor + B), cut by prefix sums of the plan: rank r takes
// [cursor + b_0 + ... + b_{r-1}, ... + b_r). So every sample of an epoch is used exactly
// once, whatever the plan or membership did in between.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

struct PositionRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end - begin; }
};

// The positions rank `rank` trains on in a step that starts at `cursor` under `batches`.
Result<PositionRange> ShardForRank(int64_t cursor, std::span<const int> batches, int rank);

// Deterministic per-epoch permutation of [0, N) (Fisher-Yates with SplitMix64), the same on
// every rank and platform. shuffle = false keeps the identity order.
class SampleOrder {
 public:
  SampleOrder(int64_t dataset_size, uint64_t seed, bool shuffle);

  int64_t dataset_size() const { return dataset_size_; }
  // Sample indices for positions [range.begin, range.end), crossing epochs as needed.
  std::vector<int64_t> Indices(PositionRange range);

 private:
  const std::vector<int64_t>& EpochOrder(int64_t epoch);

  struct Cached {
    int64_t epoch = -1;
    std::vector<int64_t> order;
  };

  int64_t dataset_size_;
  uint64_t seed_;
  bool shuffle_;
  // The two epochs asked for last: a step and the prefetched steps after it may straddle an
  // epoch boundary, and asking for both in turn must not shuffle anew each time.
  std::array<Cached, 2> cached_;
  std::size_t oldest_ = 0;
};

// SplitMix64: a tiny, well-mixed, portable generator; used for sample data and orders.
uint64_t SplitMix64(uint64_t& state);

}  // namespace fulcrum::trainer
