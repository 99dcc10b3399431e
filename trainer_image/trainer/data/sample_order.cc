#include "trainer_image/trainer/data/sample_order.h"

#include <numeric>
#include <string>

namespace fulcrum::trainer {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Result<PositionRange> ShardForRank(int64_t cursor, std::span<const int> batches, int rank) {
  if (rank < 0 || static_cast<std::size_t>(rank) >= batches.size()) {
    return InvalidArgument("rank", "is " + std::to_string(rank) + " but the plan has " +
                                       std::to_string(batches.size()) + " ranks");
  }
  if (cursor < 0) return InvalidArgument("cursor", "must be >= 0");
  int64_t begin = cursor;
  for (int r = 0; r < rank; ++r) {
    if (batches[static_cast<std::size_t>(r)] < 0) return InvalidArgument("batches", "must be >= 0");
    begin += batches[static_cast<std::size_t>(r)];
  }
  const int own = batches[static_cast<std::size_t>(rank)];
  if (own < 0) return InvalidArgument("batches", "must be >= 0");
  return PositionRange{begin, begin + own};
}

SampleOrder::SampleOrder(int64_t dataset_size, uint64_t seed, bool shuffle)
    : dataset_size_(dataset_size), seed_(seed), shuffle_(shuffle) {}

const std::vector<int64_t>& SampleOrder::EpochOrder(int64_t epoch) {
  for (const Cached& cached : cached_) {
    if (cached.epoch == epoch) return cached.order;
  }
  Cached& slot = cached_[oldest_];
  oldest_ = 1 - oldest_;
  slot.epoch = epoch;
  std::vector<int64_t>& order = slot.order;
  order.resize(static_cast<std::size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (shuffle_) {
    uint64_t state = seed_ * 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(epoch);
    for (std::size_t i = order.size(); i > 1; --i) {
      const std::size_t j = SplitMix64(state) % i;
      std::swap(order[i - 1], order[j]);
    }
  }
  return order;
}

std::vector<int64_t> SampleOrder::Indices(PositionRange range) {
  std::vector<int64_t> indices;
  indices.reserve(static_cast<std::size_t>(std::max<int64_t>(0, range.size())));
  for (int64_t position = range.begin; position < range.end; ++position) {
    const std::vector<int64_t>& order = EpochOrder(position / dataset_size_);
    indices.push_back(order[static_cast<std::size_t>(position % dataset_size_)]);
  }
  return indices;
}

}  // namespace fulcrum::trainer
