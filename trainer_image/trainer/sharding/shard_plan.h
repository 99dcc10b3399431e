// How the flat space of the trained parameters (the gradient buckets' order) is cut into one
// contiguous shard per rank for sharded data parallel (--sharding): each rank keeps the
// training state of its own shard only. Shards are sized by each rank's weight (the memory it
// has for that state), not equally: a small GPU holds a small shard. Torch-free.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

// Elements [begin, end) of the flat parameter space.
struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const ShardRange&) const = default;
};

// One range per rank, in rank order, covering [0, elements) without gaps or overlaps; each
// rank's size proportional to its weight (finite, >= 0, at least one > 0), its boundaries at
// multiples of `alignment` elements (the last ends at `elements`), so that rounding moves at
// most `alignment` elements between neighbours. A rank of weight 0 holds an empty shard.
Result<std::vector<ShardRange>> PlanShards(int64_t elements, std::span<const double> weights,
                                           int64_t alignment = 16);

// A piece of the flat space and the rank to take it from (-1: no rank holds it).
struct ShardSource {
  int rank = -1;
  ShardRange range;
  bool operator==(const ShardSource&) const = default;
};

// Cuts [0, elements) into pieces, in order, each taken from the lowest rank whose `held` range
// covers it: how a new generation gathers the state its members held under the previous plan
// (a rank that kept the whole state holds [0, elements); a newcomer holds nothing). Pieces no
// rank holds come back with rank -1: that state was lost with a rank that left without handing
// it over.
std::vector<ShardSource> SourcesFor(int64_t elements, std::span<const ShardRange> held);

}  // namespace fulcrum::trainer
