#include "operator/balancer/minimum_useful_batch.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

namespace fulcrum::balancer {

MinimumUsefulBatch::MinimumUsefulBatch(MinimumUsefulBatchConfig config) : config_(config) {}

void MinimumUsefulBatch::Observe(int micro_batch, double seconds) {
  if (micro_batch <= 0 || !(seconds > 0.0)) return;
  Average& average = by_batch_[micro_batch];
  average.seconds[static_cast<std::size_t>(average.count % kKept)] = seconds;
  ++average.count;
  std::vector<double> kept(average.seconds.begin(),
                           average.seconds.begin() + std::min(average.count, kKept));
  std::sort(kept.begin(), kept.end());
  const std::size_t half = kept.size() / 2;
  average.typical = kept.size() % 2 == 1 ? kept[half] : 0.5 * (kept[half - 1] + kept[half]);
  average.last_seen = ++observations_;
  if (by_batch_.size() > config_.max_batch_sizes) {
    by_batch_.erase(std::min_element(
        by_batch_.begin(), by_batch_.end(),
        [](const auto& x, const auto& y) { return x.second.last_seen < y.second.last_seen; }));
  }
  Recompute();
}

bool MinimumUsefulBatch::Contradicts(int micro_batch, double seconds) const {
  const auto it = by_batch_.find(micro_batch);
  if (it == by_batch_.end()) return false;
  const double typical = it->second.typical;
  return seconds > config_.margin * typical || seconds * config_.margin < typical;
}

void MinimumUsefulBatch::Reset() {
  by_batch_.clear();
  minimum_ = 1;
}

void MinimumUsefulBatch::Recompute() {
  // The sizes measured often enough, ascending, and the fastest time from each one up: then,
  // from the biggest size down, the first that is slower than the fastest size at least twice
  // as big is the biggest pathological one. O(n log n) in the sizes kept, once per report.
  std::vector<std::pair<int, double>> known;
  for (const auto& [batch, average] : by_batch_) {
    if (average.count >= config_.min_observations) known.emplace_back(batch, average.typical);
  }
  std::vector<double> fastest_from(known.size() + 1, std::numeric_limits<double>::infinity());
  for (std::size_t i = known.size(); i-- > 0;) {
    fastest_from[i] = std::min(fastest_from[i + 1], known[i].second);
  }
  minimum_ = 1;
  for (std::size_t i = known.size(); i-- > 0;) {
    const auto twice =
        std::lower_bound(known.begin(), known.end(), 2 * known[i].first,
                         [](const auto& entry, int batch) { return entry.first < batch; });
    const auto from = static_cast<std::size_t>(twice - known.begin());
    if (known[i].second > config_.margin * fastest_from[from]) {
      // Everything up to the biggest pathological size is too, and the sizes between it and
      // the next one measured to be fine are unknown: that one is the least safe batch.
      minimum_ = i + 1 < known.size() ? known[i + 1].first : known[i].first + 1;
      return;
    }
  }
}

}  // namespace fulcrum::balancer
