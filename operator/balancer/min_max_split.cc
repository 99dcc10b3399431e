#include "operator/balancer/min_max_split.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <utility>

namespace fulcrum::balancer {
namespace {

// A breakpoint of the piecewise-linear total batch as a function of the level T: worker i
// starts absorbing samples at fixed + per_sample·lo and stops at fixed + per_sample·hi.
struct SlopeChange {
  double level;
  double slope_delta;
};

// (cost, worker index): ordered by cost, then index, so ties break the same way every time.
using CostedWorker = std::pair<double, std::size_t>;

// Hands out the missing samples one at a time to the worker whose next sample costs least.
// Exact for nondecreasing costs: the picks are the smallest remaining increments overall.
void GrowToTotal(std::span<const SplitWorker> workers, std::vector<int>& batches, int64_t missing) {
  std::priority_queue<CostedWorker, std::vector<CostedWorker>, std::greater<>> cheapest;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (batches[i] < workers[i].hi) cheapest.emplace(SplitCost(workers[i], batches[i] + 1), i);
  }
  for (; missing > 0; --missing) {
    const std::size_t i = cheapest.top().second;
    cheapest.pop();
    ++batches[i];
    if (batches[i] < workers[i].hi) cheapest.emplace(SplitCost(workers[i], batches[i] + 1), i);
  }
}

// Takes surplus samples back from the currently most expensive workers. Only reached when the
// start already sits at or below the optimum's level, so any removal keeps the split optimal;
// removing from the top keeps the others balanced too.
void ShrinkToTotal(std::span<const SplitWorker> workers, std::vector<int>& batches,
                   int64_t surplus) {
  std::priority_queue<CostedWorker> dearest;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (batches[i] > workers[i].lo) dearest.emplace(SplitCost(workers[i], batches[i]), i);
  }
  for (; surplus > 0; --surplus) {
    const std::size_t i = dearest.top().second;
    dearest.pop();
    --batches[i];
    if (batches[i] > workers[i].lo) dearest.emplace(SplitCost(workers[i], batches[i]), i);
  }
}

// The most `worker` can take in [lo, hi] at a cost of at most `level` (lo when even lo costs
// more): costs are nondecreasing, so a binary search finds it.
int MostWithin(const SplitWorker& worker, double level) {
  int fits = worker.lo;
  int above = worker.hi + 1;
  while (above - fits > 1) {
    const int middle = fits + (above - fits) / 2;
    if (SplitCost(worker, middle) <= level) {
      fits = middle;
    } else {
      above = middle;
    }
  }
  return fits;
}

// A start for the exact refinement when some costs are measured curves, for which the
// continuous water level has no closed form: the batches each worker takes at the highest
// level that still leaves samples to hand out (found by bisection), which is below the integer
// optimum's bottleneck, as the refinement requires.
std::vector<int> CurveStart(std::span<const SplitWorker> workers, int total) {
  auto take = [&](double level) {
    std::vector<int> batches;
    int64_t sum = 0;
    for (const SplitWorker& w : workers) {
      batches.push_back(MostWithin(w, level));
      sum += batches.back();
    }
    return std::pair{batches, sum};
  };
  double low = 0.0;
  double high = 0.0;
  for (const SplitWorker& w : workers) {
    if (w.lo > 0) low = std::max(low, SplitCost(w, w.lo));
    high = std::max(high, SplitCost(w, w.hi));
  }
  auto [batches, sum] = take(low);
  if (sum >= total) return batches;
  for (int iteration = 0; iteration < 64 && high - low > 1e-12 * high; ++iteration) {
    const double middle = 0.5 * (low + high);
    auto [candidate, candidate_sum] = take(middle);
    if (candidate_sum < total) {
      low = middle;
      batches = std::move(candidate);
    } else {
      high = middle;
    }
  }
  return batches;
}

}  // namespace

double SplitCost(const SplitWorker& worker, int batch) {
  if (batch <= 0) return 0.0;
  return CurveSeconds(worker.fixed_seconds, worker.seconds_per_sample, worker.measured, batch);
}

double BottleneckCost(std::span<const SplitWorker> workers, std::span<const int> batches) {
  double bottleneck = 0.0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    bottleneck = std::max(bottleneck, SplitCost(workers[i], batches[i]));
  }
  return bottleneck;
}

double ContinuousWaterLevel(std::span<const SplitWorker> workers, int total) {
  std::vector<SlopeChange> changes;
  changes.reserve(2 * workers.size());
  double filled = 0.0;
  for (const SplitWorker& w : workers) {
    changes.push_back({w.fixed_seconds + w.seconds_per_sample * w.lo, 1.0 / w.seconds_per_sample});
    changes.push_back({w.fixed_seconds + w.seconds_per_sample * w.hi, -1.0 / w.seconds_per_sample});
    filled += w.lo;
  }
  std::sort(changes.begin(), changes.end(),
            [](const SlopeChange& x, const SlopeChange& y) { return x.level < y.level; });
  // Adding and removing the same 1/k values leaves float residue; a slope this small is zero.
  double max_slope = 0.0;
  for (const SlopeChange& change : changes) max_slope = std::max(max_slope, change.slope_delta);
  const double negligible_slope = 1e-12 * max_slope;
  double slope = 0.0;
  double level = changes.front().level;
  for (const SlopeChange& change : changes) {
    const double next_filled = filled + slope * (change.level - level);
    if (next_filled >= total && slope > negligible_slope) {
      return level + (total - filled) / slope;
    }
    filled = next_filled;
    level = change.level;
    slope += change.slope_delta;
  }
  return level;
}

Result<std::vector<int>> MinMaxSplit(std::span<const SplitWorker> workers, int total) {
  int64_t lo_sum = 0;
  int64_t hi_sum = 0;
  for (const SplitWorker& w : workers) {
    lo_sum += w.lo;
    hi_sum += w.hi;
  }
  if (workers.empty() || lo_sum > total || hi_sum < total) {
    return MakeError(ErrorCode::kInfeasible, "no split of " + std::to_string(total) +
                                                 " samples fits the bounds (sum of "
                                                 "minimums " +
                                                 std::to_string(lo_sum) + ", sum of maximums " +
                                                 std::to_string(hi_sum) + ")");
  }
  const bool curves = std::any_of(workers.begin(), workers.end(),
                                  [](const SplitWorker& w) { return !w.measured.empty(); });
  if (curves) {
    std::vector<int> batches = CurveStart(workers, total);
    int64_t assigned = 0;
    for (int batch : batches) assigned += batch;
    if (assigned < total) GrowToTotal(workers, batches, total - assigned);
    if (assigned > total) ShrinkToTotal(workers, batches, assigned - total);
    return batches;
  }
  // Every integer split's bottleneck is at least the continuous level and at least each
  // worker's cost at its minimum. Shading the level by a relative 1e-9 keeps rounding in the
  // float arithmetic from lifting the start above the integer optimum.
  double level = ContinuousWaterLevel(workers, total) * (1.0 - 1e-9);
  for (const SplitWorker& w : workers) {
    if (w.lo > 0) level = std::max(level, SplitCost(w, w.lo));
  }
  // Start each worker at the most it can take without exceeding the level: every such start is
  // at or below the optimum, so finishing greedily is exact and needs at most ~N more picks.
  std::vector<int> batches(workers.size());
  int64_t assigned = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const SplitWorker& w = workers[i];
    const double fits = std::floor((level - w.fixed_seconds) / w.seconds_per_sample);
    // Costs at the limits of a double (1/k overflowing, inf - inf) leave no start: the least,
    // and the greedy finish does the rest (job_session_fuzz found a NaN cast to int here).
    int batch = std::isnan(fits) || fits <= w.lo ? w.lo
                : fits >= w.hi                   ? w.hi
                                                 : static_cast<int>(fits);
    while (batch > w.lo && SplitCost(w, batch) > level) --batch;
    batches[i] = batch;
    assigned += batch;
  }
  if (assigned < total) GrowToTotal(workers, batches, total - assigned);
  if (assigned > total) ShrinkToTotal(workers, batches, assigned - total);
  return batches;
}

}  // namespace fulcrum::balancer
