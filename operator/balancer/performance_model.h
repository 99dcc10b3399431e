// Per-worker compute-time model c(b) = s · g(b). g is what this worker's own steps took,
// size by size (robust per-size statistics, per_size_times.h), with a line a + k·b fitted
// online to the same reports (exponentially weighted least squares on relative errors) only to
// interpolate and extrapolate; s is a speed factor. What was measured is kept:
//  - a time far off the line at a size not measured before is what the device does there (a
//    minimum efficient batch, small-batch overheads): it updates g at that size, never s;
//  - a change of speed (thermal throttling, a noisy neighbour, an emulated slowdown) is
//    declared only when a size already measured in the current regime (or within ±10% of
//    one) contradicts that history, or a new size's time is far outside what the measured
//    sizes allow any curve of this shape to take there, `regime_change_run` reports in a row
//    on the same side, or in a longer run of reports that all lean that way (held, not kept,
//    so heavy noise cannot fold a slowdown into the history it contradicts); one-off pauses
//    are not;
//  - a confirmed change moves s, which rescales every old measurement instead of deleting it;
//    a size measured only in an older regime is replaced by its first new measurement, and
//    every report at (or within ±50% of) a size measured before the change refines s (the
//    median of what they imply), since three reports size a change only roughly, and a
//    "change" that was a burst of contention ends: where the worker landed then says so.
#pragma once

#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/result.h"
#include "operator/balancer/cost_curve.h"
#include "operator/balancer/per_size_times.h"
#include "operator/balancer/weighted_line_fit.h"

namespace fulcrum::balancer {

struct LinearCost {
  double fixed_seconds = 0.0;       // a
  double seconds_per_sample = 0.0;  // k
  double Seconds(double batch) const { return fixed_seconds + seconds_per_sample * batch; }
  LinearCost Scaled(double factor) const {
    return {fixed_seconds * factor, seconds_per_sample * factor};
  }
};

struct FitterConfig {
  double forgetting = 0.98;     // weight an observation keeps per newer one (~50-step memory)
  double anchor_weight = 0.5;   // observations' worth of pull toward the last known shape
  double initial_noise = 0.05;  // relative timing noise assumed before the data says
  double min_noise = 0.005;     // floor, so noiseless data does not make every step an outlier
  // A time further than this many noise units from its size's typical time contradicts it...
  double outlier_sigmas = 4.0;
  double min_outlier_residual = 0.15;  // ...and never when closer than 15%
  int regime_change_run = 3;           // consecutive same-side contradictions that mean a change
  // After a contradiction, later reports on its side beyond this many noise units (and the
  // outlier residual's floor) are held in its run instead of kept: a run ends at the first
  // report short of this, or on the other side. Equal to outlier_sigmas, the run is three
  // contradictions in a row.
  double support_sigmas = 2.0;
  // A run this long means a change too, however few of its reports reach the outlier bar: at
  // 36% timing noise (contention on shared cores) that bar is 2.45x, and a 3.5x slowdown whose
  // measured times grew 2.4x (the wait for a core does not scale) reached it on one report in
  // two. Without noise this many reports in a row beyond 2 sigmas on one side do not happen
  // (0.023^5 after a 4-sigma one).
  int support_run = 6;
  // After a confirmed change, a report refines the speed factor against the curve measured
  // before the change, at sizes within this relative distance of one measured then. Wide enough
  // for the answer's landing (a worker shed 63 -> 47 after a 5-step burst of contention at 2x
  // had no size within 10% to compare with, kept the burst's speed, and the job ran 14%
  // slower to the end: fulcrum-sim, docs/benchmarks.md); the median over several reports and
  // a curve fitted to every size keep the estimate within noise of a straight scale.
  double speed_refinement_reach = 0.5;
  // At a size with no measured neighbour, a time contradicts this regime only beyond what its
  // measured sizes allow (ShapeBoundsAt) by this much (and by the outlier residual): per-sample
  // time can rise a little with the batch on real devices (caches), so the bound is not exact.
  double shape_slack = 0.25;
  // A tiny batch can take longer than a bigger one (CPU threads or GPU SMs left idle: the
  // minimum useful batch), but not by this much more: a time at a size below one measured in
  // this regime beyond (1 + this) × that size's time is a change of speed, not the device's
  // shape. Without it a slowdown that hit on the first step of a move to a smaller size, where
  // only bigger sizes were measured, became that size's history, the planning curve (made
  // nondecreasing) hid it, and no plan ever followed (issue 25: a Python job's rank held 23
  // samples 6x slower to the end; ControllerTest
  // ASlowdownOnTheFirstStepOfASmallerSizeIsStillAnswered).
  double smaller_batch_slack = 1.0;
  // a and k count as separated once the data alone pins k down to this relative standard
  // error, after at least this many effective observations.
  double identifiable_slope_error = 0.10;
  double identifiable_observations = 8.0;
  // A size's typical time replaces the line there (MeasuredCosts) when the two differ by more
  // than this many of the typical time's standard errors, and by at least min_curve_deviation:
  // within that, the line (all sizes' data together) is the better estimate.
  double curve_sigmas = 4.0;
  double min_curve_deviation = 0.10;
  // What the worker took long ago is not what it takes now when its speed drifted since, too
  // gradually for any report to contradict a history: a trainer's start-up (its data pipeline
  // filling its prefetch queue, allocators growing, the first steps competing for cores) slows
  // its first steps. In the demo the V100's line fitted to them held a fixed cost of 0.13 s
  // where it took 0.016 s at batch 1: its later times, far off that line, were kept as knees and
  // never refitted it, and the sizes run during the start-up bent the planning curve, so it ran
  // at 9 of its 27 samples for 270 steps (85% efficiency). After this many reports of any size
  // with no report added to the line, the line is refitted to the sizes measured since; and a
  // size not measured in this many reports that contradicts the line no longer counts
  // (PerSizeTimes::MarkStale). About the line's memory (1 / (1 - forgetting)): a size
  // revisited within it, or one the line still agrees with, keeps counting. 0: never.
  int stale_after_reports = 50;
  PerSizeTimesConfig sizes;
};

// Relative standard error of the slope k that `data` (weighted 1 / time²) pins down on its
// own, given the relative timing noise; infinite when the batches seen have no spread.
double RelativeSlopeError(const WeightedLineFit& data, double noise, double slope);

enum class ObservationOutcome {
  kAccepted,      // kept: a new measurement of its size, and a point of the line
  kOutlier,       // set aside: contradicts its size's history, not (yet) confirmed as a change
  kRegimeChange,  // the worker's speed really changed: s moved, old data rescaled with it
  // Kept, and the last confirmed change is over: reports at another size put the speed back
  // within min_outlier_residual (15%) of what it was before the change (a burst of contention,
  // a noisy neighbour).
  kChangeEnded,
};

class ComputeTimeModel {
 public:
  // `prior` gives the first estimate (e.g. from the GPU catalog); its scale is replaced by
  // the first observation, its shape (a : k) only as data accumulates.
  explicit ComputeTimeModel(LinearCost prior, FitterConfig config = {});

  // batch: samples in one micro-step (> 0); seconds: its compute time (finite, > 0).
  Result<ObservationOutcome> Observe(double batch, double seconds);

  // Takes the shape (a : k) from better evidence, e.g. the pooled data of workers with the
  // same GPU product, when it pins k down better (`slope_error`, relative) than this worker's
  // own data do; the level stays this worker's own. The worker then counts as identified.
  void AdoptShape(LinearCost shape, double slope_error);

  // The line s · (a + k·b): what the curve is interpolated and extrapolated with.
  LinearCost estimate() const { return line_.Scaled(speed_); }
  // The curve planning uses for this worker's costs: measured typical times (× s) at the sizes
  // where they contradict `line` (MeasuredCosts), `line` elsewhere; at a micro-batch.
  double Seconds(int batch, const LinearCost& line) const;
  double Seconds(int batch) const { return Seconds(batch, estimate()); }
  // The settled sizes' times as points of the curve when at least one of them contradicts
  // `line` (each contradicting size at its typical time × s, the others on `line`, so the
  // curve bends only where the data say); empty when the line is right everywhere measured.
  std::vector<CostPoint> MeasuredCosts(const LinearCost& line) const;
  // The sizes settled in the current regime at their typical times (× s): only what this
  // worker measurably takes now, no line.
  std::vector<CostPoint> CurrentRegimeCosts() const;

  // What RetireStaleEvidence (FitterConfig::stale_after_reports) retired since the last call:
  // whether the line was refitted to the sizes measured since, and the sizes that no longer
  // count. For the log: a plan resting on fewer measurements than before should say why.
  struct RetiredEvidence {
    bool line_refitted = false;
    std::vector<int> sizes;
  };
  RetiredEvidence TakeRetiredEvidence() { return std::exchange(retired_, {}); }

  // The speed factor s (1 until a speed change is confirmed) and the regime it belongs to
  // (0, then +1 per confirmed change).
  double speed_factor() const { return speed_; }
  int regime() const { return regime_; }
  // How many reports the current speed factor rests on since the last confirmed change (the
  // confirming ones included); 0 before any change.
  int speed_evidence() const { return static_cast<int>(speed_estimates_.size()); }
  // The sizes measured, as kept (speed-free units: multiply by speed_factor()).
  const PerSizeTimes& sizes() const { return sizes_; }
  // The least batch worth giving this worker (per_size_times.h), with a margin wide enough that
  // this worker's own timing noise cannot make a batch look slower than a bigger one.
  int MinimumUsefulBatch() const;
  // From now on MinimumUsefulBatch compares only sizes measured from now (per_size_times.h).
  void RestartSizeComparisons() { sizes_.CompareOnlyFromNow(); }
  // Relative standard error of the ratio of two sizes' typical times (medians of mostly their
  // last five reports, each off by about 1.25·noise/√5): the least relative difference between
  // two of them, in standard errors, that this worker's timing noise cannot make.
  double TypicalRatioError() const;

  // True once the batch sizes seen spread enough to pin k down, or a shape was adopted; the
  // controller dithers batch sizes until then. Kept across a regime change (so is the shape).
  bool identified() const { return identified_; }
  int observations() const { return observations_; }
  double noise() const { return noise_; }
  double effective_observations() const { return effective_observations_; }
  // Relative standard error of the predicted time near the batches seen: noise / sqrt(n).
  double LevelError() const;
  // The weighted (1 / predicted²) data behind the line, in speed-free units (divided by s),
  // for pooling with other workers.
  const WeightedLineFit& data() const { return data_; }

 private:
  // The least relative residual that contradicts a time (FitterConfig::outlier_sigmas noise
  // units, never under min_outlier_residual): for a size's history, the line, and a change.
  double OutlierResidual() const;
  // The least relative residual that holds a report in a run of contradictions
  // (FitterConfig::support_sigmas).
  double SupportResidual() const;
  // Keeps a report: a measurement of its size, a point of the line, a refinement of the speed.
  ObservationOutcome Keep(double batch, double seconds);
  // Ends a run of contradictions that confirmed no change: the contradictions are set aside,
  // the reports held with them kept. Returns whether keeping them ended the last change.
  bool EndSuspectRun();
  void AddPoint(double batch, double speed_free_seconds, double weight);
  // Whether a settled size's typical time is off `line` beyond what its own noise explains
  // (FitterConfig::curve_sigmas, min_curve_deviation); both speed-free.
  bool ContradictsLine(const SizeRecord& record, const LinearCost& line) const;
  // FitterConfig::stale_after_reports: refits the line to the sizes measured since, when no
  // report reached it for that long; marks the sizes unmeasured for that long that contradict
  // it stale.
  void RetireStaleEvidence();
  // What this regime's history says `size` takes (speed-free): its own typical time when it
  // was measured often enough in this regime (exact), else the nearest such size's within ±10%
  // carried over by the line's shape; nullopt when neither exists.
  struct History {
    double speed_free_seconds = 0.0;
    bool exact = false;
  };
  std::optional<History> HistoryAt(int size) const;
  // What the sizes measured in this regime allow `size` to take (speed-free): time per sample
  // never rises with the batch (a + k·b with a, k >= 0, a device flat below its knee and
  // small-batch overheads all obey it; total time need not, a tiny batch can take longer than
  // a bigger one, though not by smaller_batch_slack more); nullopt when none was measured.
  // Unbounded sides are 0 and infinity.
  struct ShapeBounds {
    double lowest = 0.0;
    double highest = 0.0;
  };
  std::optional<ShapeBounds> ShapeBoundsAt(int size) const;
  // HistoryAt, or where it has none and the time is far outside ShapeBoundsAt, the line's time
  // within those bounds: a slowdown that coincides with a move to a size never measured (a
  // plan or the dither landing as it happens) is then seen, not taken for g at that size.
  std::optional<History> ContradictableHistory(int size, double speed_free) const;
  void ConfirmSpeedChange();
  // Returns whether the report ended the last confirmed change (ObservationOutcome::kChangeEnded).
  bool RefineSpeed(int size, double seconds);
  // Whether a report at `size` refines the speed factor of the last confirmed change.
  bool RefinesSpeedAt(int size) const;
  // What `size` took before the last confirmed change, speed-free: the curve measured then.
  double ReferenceSeconds(int size) const;
  // The median of the speed estimates at the size of the latest one when it has
  // kSpeedEstimatesAtOneSize of them, else of all.
  double SpeedFromEstimates() const;
  void Refit();
  LinearCost Fit() const;

  FitterConfig config_;
  LinearCost anchor_;  // the shape the data cannot resolve on its own comes from here
  LinearCost line_;    // speed-free: estimate() is line_ · speed_
  WeightedLineFit data_;
  PerSizeTimes sizes_;
  double speed_ = 1.0;
  int regime_ = 0;
  double effective_observations_ = 0.0;
  double noise_;
  int observations_ = 0;
  int reports_off_line_ = 0;  // kept since the last one added to the line
  RetiredEvidence retired_;   // TakeRetiredEvidence
  bool identified_ = false;
  // A report in a run of contradictions, with what its size's history expected: a
  // contradiction, or a report held with them (FitterConfig::support_sigmas).
  struct Suspect {
    int size = 0;
    double seconds = 0.0;
    double history_speed_free_seconds = 0.0;
    bool contradicts = true;
  };
  std::vector<Suspect> suspects_;  // all on one side
  // Since the last confirmed change: the sizes measured before it, the speed-free curve then,
  // and the speed factors that reports near those sizes imply; speed_ is their median.
  static constexpr std::size_t kMaxSpeedEstimates = 15;
  static constexpr std::size_t kSpeedEstimatesAtOneSize = 3;
  std::set<int> reference_sizes_;
  LinearCost reference_line_;                // the line then, speed-free
  std::vector<CostPoint> reference_points_;  // the sizes that bent the curve then, speed-free
  double speed_before_change_ = 1.0;         // s before the last confirmed change
  double confirmed_speed_ = 1.0;             // what the confirming reports implied
  std::vector<int> confirming_sizes_;        // where they were measured
  std::vector<double> speed_estimates_;
  std::vector<int> speed_estimate_sizes_;  // the size each estimate was measured at
  int suspect_side_ = 0;
};

}  // namespace fulcrum::balancer
