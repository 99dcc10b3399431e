// What one worker's steps took, size by size: the robust per-size statistics the compute-time
// model keeps (performance_model.h). Each size remembers the regime it was last measured in,
// and each regime its speed factor; typical times are given in the model's speed-free units
// (measured time ÷ its regime's speed factor), so when a speed factor is set or refined the
// measurements are rescaled with it, never lost. A size measured in the current regime can
// contradict its history (a new speed); one measured only in an older regime cannot, and its
// first new measurement replaces the rescaled guess. Pure; one per worker.
//
// It also answers the question MinimumUsefulBatch used to: below some size a device runs a
// step no faster than a bigger one, or slower (CPU threads or GPU SMs left idle), and a batch
// whose typical time is more than `margin` above that of a batch at least `bigger_ratio`
// times as big is not worth giving (no plan hands out a batch measured slower than a clearly
// larger one), nor is any
// smaller one or any unmeasured one up to the next size measured to be fine (the planner must
// not find out one size at a time, a step each). The measured curve the planner uses is made
// nondecreasing (cost_curve.h), which would hide such a batch's real cost; this keeps the
// planner above it instead.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace fulcrum::balancer {

struct PerSizeTimesConfig {
  double margin = 1.1;  // beyond timing noise, for the minimum useful batch
  // A batch is compared with those at least this much bigger: closer sizes differ by less than
  // timing noise wherever the cost rises with the batch (184 vs 185 samples), and noise alone
  // would then make batches look pathological.
  double bigger_ratio = 1.5;
  int min_observations = 3;          // per batch size, before its typical time counts
  std::size_t max_batch_sizes = 64;  // distinct sizes kept (the least recently seen go first)
};

// One size's statistics.
struct SizeRecord {
  int batch = 0;
  double typical = 0.0;  // median of the last few times, ÷ its regime's speed factor
  int count = 0;         // times measured in `regime` (all of them, not only those kept)
  int regime = 0;        // the regime of its latest measurement
  uint64_t age = 0;      // measurements of any size since its latest one
};

class PerSizeTimes {
 public:
  explicit PerSizeTimes(PerSizeTimesConfig config = {});

  // One micro-step of `batch` samples took `seconds` (both > 0, as measured) in `regime`
  // (>= every regime seen before). A size last measured in an older regime starts over: the
  // new measurement replaces the rescaled old ones.
  void Observe(int batch, double seconds, int regime);
  // Drops `batch` if it was last measured in `regime`: what it took there no longer says what it
  // takes (a burst of contention that was taken for a change of speed).
  void Forget(int batch, int regime);
  // `batch` no longer says what it takes (its speed drifted since, with no report there to
  // contradict it): it counts nowhere until measured again, when it starts over; except for
  // MinimumUseful, since a batch measured slower than a bigger one stays a poor choice until
  // measured again.
  void MarkStale(int batch);
  // The speed factor of `regime` (> 0; 1 until set); a new regime starts with the last one's.
  void SetSpeed(int regime, double speed);

  // Neither counts a stale size (MarkStale).
  std::optional<SizeRecord> Find(int batch) const;
  // Sizes measured at least min_observations times in their regime, ascending.
  std::vector<SizeRecord> Settled() const;
  // Whether `batch` has min_observations measurements taken in `regime`.
  bool SettledIn(int batch, int regime) const;
  // Whether a size within ±`tolerance` (relative, at least one sample) of `batch` was measured
  // at least once, in any regime or, given one, last in `regime`: the curve there is
  // interpolated, not extrapolated.
  bool MeasuredNear(int batch, double tolerance, std::optional<int> regime = std::nullopt) const;

  // The least batch worth giving; 1 when no batch is known to be slower than a bigger one by
  // more than `margin` (at least config().margin; the caller widens it for noisy timings).
  // Only sizes measured since the last CompareOnlyFromNow count.
  int MinimumUseful(double margin = 0.0) const;
  // Sizes measured until now are no longer compared for MinimumUseful, until measured again: the
  // worker's speed since may not be what it was when they were (a speed change still under way
  // when the plan answering it landed; controller.cc).
  void CompareOnlyFromNow() { compared_after_ = observations_; }
  const PerSizeTimesConfig& config() const { return config_; }

  // The last kKept times of one size; their median is its typical time, which one pause (a
  // GC, a noisy neighbour) cannot move.
  static constexpr int kKept = 5;

 private:
  struct Times {
    std::array<double, kKept> seconds{};
    int count = 0;  // observations in `regime`, of which the last min(count, kKept) are kept
    int regime = 0;
    uint64_t last_seen = 0;
    bool stale = false;    // MarkStale
    double typical = 0.0;  // as measured, not yet divided by the regime's speed
  };
  double SpeedOf(int regime) const;
  double SpeedFree(const Times& times) const { return times.typical / SpeedOf(times.regime); }
  SizeRecord RecordOf(int batch, const Times& times) const;

  PerSizeTimesConfig config_;
  std::map<int, Times> by_batch_;
  std::vector<double> speeds_{1.0};  // by regime
  uint64_t observations_ = 0;
  uint64_t compared_after_ = 0;  // MinimumUseful compares sizes last seen after this
};

}  // namespace fulcrum::balancer
