// Per-worker compute-time model c(b) = a + k·b, fitted online from (micro-batch, seconds)
// reports. Exponentially weighted least squares on relative errors, robust to one-off outliers
// (a GC pause), quick to follow a real change of speed (thermal throttling, a noisy
// neighbour), and stable when the batch stops moving.
#pragma once

#include <utility>
#include <vector>

#include "operator/balancer/weighted_line_fit.h"
#include "common/result.h"

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
  double outlier_sigmas = 4.0;  // residuals beyond this many noise units are suspect...
  double min_outlier_residual = 0.15;  // ...and never below 15%
  int warmup_observations = 5;         // no rejection until the model has seen this many
  int regime_change_run = 3;           // consecutive same-side outliers that mean a real change
  // a and k count as separated once the data alone pins k down to this relative standard
  // error, after at least this many effective observations.
  double identifiable_slope_error = 0.10;
  double identifiable_observations = 8.0;
};

// Relative standard error of the slope k that `data` (weighted 1 / time²) pins down on its
// own, given the relative timing noise; infinite when the batches seen have no spread.
double RelativeSlopeError(const WeightedLineFit& data, double noise, double slope);

enum class ObservationOutcome {
  kAccepted,      // used for the fit
  kOutlier,       // set aside: one-off, or the start of a change not yet confirmed
  kRegimeChange,  // the worker's speed really changed: the fit restarted from the new level
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

  const LinearCost& estimate() const { return estimate_; }
  // True once the batch sizes seen spread enough to pin k down, or a shape was adopted; the
  // controller dithers batch sizes until then. Kept across a regime change (so is the shape).
  bool identified() const { return identified_; }
  int observations() const { return observations_; }
  double noise() const { return noise_; }
  double effective_observations() const { return effective_observations_; }
  // Relative standard error of the predicted time near the batches seen: noise / sqrt(n).
  double LevelError() const;
  // The weighted (1 / predicted²) data behind the fit, for pooling with other workers.
  const WeightedLineFit& data() const { return data_; }

 private:
  void AddPoint(double batch, double seconds, double weight);
  void StartNewRegime();
  void Refit();
  LinearCost Fit() const;

  FitterConfig config_;
  LinearCost anchor_;  // the shape the data cannot resolve on its own comes from here
  LinearCost estimate_;
  WeightedLineFit data_;
  double effective_observations_ = 0.0;
  double noise_;
  int observations_ = 0;
  bool identified_ = false;
  std::vector<std::pair<double, double>> suspects_;  // (batch, seconds), all on one side
  int suspect_side_ = 0;
};

}  // namespace fulcrum::balancer
