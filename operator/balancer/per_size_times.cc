#include "operator/balancer/per_size_times.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace fulcrum::balancer {

PerSizeTimes::PerSizeTimes(PerSizeTimesConfig config) : config_(config) {}

double PerSizeTimes::SpeedOf(int regime) const {
  return speeds_[static_cast<std::size_t>(std::clamp<int>(regime, 0, speeds_.size() - 1))];
}

void PerSizeTimes::SetSpeed(int regime, double speed) {
  if (regime < 0 || !(speed > 0.0) || !std::isfinite(speed)) return;
  while (static_cast<int>(speeds_.size()) <= regime) speeds_.push_back(speeds_.back());
  speeds_[static_cast<std::size_t>(regime)] = speed;
}

void PerSizeTimes::Observe(int batch, double seconds, int regime) {
  if (batch <= 0 || regime < 0 || !(seconds > 0.0) || !std::isfinite(seconds)) return;
  while (static_cast<int>(speeds_.size()) <= regime) speeds_.push_back(speeds_.back());
  Times& times = by_batch_[batch];
  if (times.count > 0 && (times.regime < regime || times.stale)) times = Times{};
  times.regime = regime;
  times.seconds[static_cast<std::size_t>(times.count % kKept)] = seconds;
  ++times.count;
  std::vector<double> kept(times.seconds.begin(),
                           times.seconds.begin() + std::min(times.count, kKept));
  std::sort(kept.begin(), kept.end());
  const std::size_t half = kept.size() / 2;
  times.typical = kept.size() % 2 == 1 ? kept[half] : 0.5 * (kept[half - 1] + kept[half]);
  times.last_seen = ++observations_;
  if (by_batch_.size() > config_.max_batch_sizes) {
    by_batch_.erase(std::min_element(
        by_batch_.begin(), by_batch_.end(),
        [](const auto& x, const auto& y) { return x.second.last_seen < y.second.last_seen; }));
  }
}

void PerSizeTimes::MarkStale(int batch) {
  const auto it = by_batch_.find(batch);
  if (it != by_batch_.end()) it->second.stale = true;
}

void PerSizeTimes::Forget(int batch, int regime) {
  const auto it = by_batch_.find(batch);
  if (it != by_batch_.end() && it->second.regime == regime) by_batch_.erase(it);
}

SizeRecord PerSizeTimes::RecordOf(int batch, const Times& times) const {
  return {batch, SpeedFree(times), times.count, times.regime, observations_ - times.last_seen};
}

std::optional<SizeRecord> PerSizeTimes::Find(int batch) const {
  const auto it = by_batch_.find(batch);
  if (it == by_batch_.end() || it->second.stale) return std::nullopt;
  return RecordOf(batch, it->second);
}

std::vector<SizeRecord> PerSizeTimes::Settled() const {
  std::vector<SizeRecord> settled;
  for (const auto& [batch, times] : by_batch_) {
    if (times.count >= config_.min_observations && !times.stale) {
      settled.push_back(RecordOf(batch, times));
    }
  }
  return settled;
}

bool PerSizeTimes::SettledIn(int batch, int regime) const {
  const auto it = by_batch_.find(batch);
  return it != by_batch_.end() && it->second.regime == regime &&
         it->second.count >= config_.min_observations && !it->second.stale;
}

bool PerSizeTimes::MeasuredNear(int batch, double tolerance, std::optional<int> regime) const {
  const int reach = std::max(1, static_cast<int>(std::lround(tolerance * batch)));
  for (auto it = by_batch_.lower_bound(batch - reach);
       it != by_batch_.end() && it->first <= batch + reach; ++it) {
    if (!it->second.stale && (!regime || it->second.regime == *regime)) return true;
  }
  return false;
}

int PerSizeTimes::MinimumUseful(double margin) const {
  margin = std::max(margin, config_.margin);
  // The sizes measured often enough, ascending, and the fastest time from each one up: then,
  // from the biggest size down, the first that is slower than the fastest size at least
  // bigger_ratio times as big is the biggest pathological one. O(n log n) in the sizes kept
  // (at most max_batch_sizes), once per worker and plan decision.
  // Only sizes measured in the latest regime are compared: across regimes the comparison goes
  // through speed factors sized from a few reports, and one sized ×3.89 for a real ×8 made
  // batch 20 after a slowdown look slower than 54 before it (e2e: the slowed A100 forced back
  // up 20 -> 51 -> 53).
  const int latest = static_cast<int>(speeds_.size()) - 1;
  std::vector<std::pair<int, double>> known;
  for (const auto& [batch, times] : by_batch_) {
    if (times.count >= config_.min_observations && times.regime == latest &&
        times.last_seen > compared_after_) {
      known.emplace_back(batch, SpeedFree(times));
    }
  }
  std::vector<double> fastest_from(known.size() + 1, std::numeric_limits<double>::infinity());
  for (std::size_t i = known.size(); i-- > 0;) {
    fastest_from[i] = std::min(fastest_from[i + 1], known[i].second);
  }
  for (std::size_t i = known.size(); i-- > 0;) {
    const double compared_from = config_.bigger_ratio * known[i].first;
    const auto bigger =
        std::lower_bound(known.begin(), known.end(), compared_from,
                         [](const auto& entry, double batch) { return entry.first < batch; });
    const auto from = static_cast<std::size_t>(bigger - known.begin());
    if (known[i].second > margin * fastest_from[from]) {
      // Everything up to the biggest pathological size is too, and the sizes between it and
      // the next one measured to be fine are unknown: that one is the least safe batch.
      return known[i + 1].first;
    }
  }
  return 1;
}

}  // namespace fulcrum::balancer
