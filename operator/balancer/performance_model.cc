#include "operator/balancer/performance_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fulcrum::balancer {

ComputeTimeModel::ComputeTimeModel(LinearCost prior, FitterConfig config)
    : config_(config), anchor_(prior), estimate_(prior), noise_(config.initial_noise) {}

Result<ObservationOutcome> ComputeTimeModel::Observe(double batch, double seconds) {
  if (!std::isfinite(batch) || batch <= 0.0) {
    return InvalidArgument("batch", "must be a finite number > 0");
  }
  if (!std::isfinite(seconds) || seconds <= 0.0) {
    return InvalidArgument("compute_seconds", "must be a finite number > 0");
  }
  if (observations_ == 0 && data_.total_weight() == 0.0) {
    // Catalog priors only know relative speed; the first report sets the absolute scale.
    anchor_ = anchor_.Scaled(seconds / anchor_.Seconds(batch));
    estimate_ = anchor_;
  }
  const double residual = seconds / estimate_.Seconds(batch) - 1.0;
  const double magnitude = std::abs(residual);
  const double threshold = std::max(config_.outlier_sigmas * noise_, config_.min_outlier_residual);
  if (observations_ >= config_.warmup_observations && magnitude > threshold) {
    const int side = residual > 0.0 ? 1 : -1;
    if (side != suspect_side_) suspects_.clear();
    suspect_side_ = side;
    suspects_.emplace_back(batch, seconds);
    if (static_cast<int>(suspects_.size()) < config_.regime_change_run) {
      return ObservationOutcome::kOutlier;
    }
    StartNewRegime();
    return ObservationOutcome::kRegimeChange;
  }
  suspects_.clear();
  suspect_side_ = 0;
  // Huber weighting: full weight inside two noise units, then fading as 1/residual.
  const double huber = magnitude <= 2.0 * noise_ ? 1.0 : 2.0 * noise_ / magnitude;
  AddPoint(batch, seconds, huber);
  // Mean absolute residual × 1.25 estimates a normal standard deviation; clipping the input
  // keeps single spikes from inflating it.
  noise_ =
      std::max(config_.min_noise, 0.95 * noise_ + 0.05 * 1.25 * std::min(magnitude, 3.0 * noise_));
  ++observations_;
  Refit();
  return ObservationOutcome::kAccepted;
}

void ComputeTimeModel::AddPoint(double batch, double seconds, double weight) {
  // Weighting by 1 / predicted² fits relative errors: timing noise is proportional to time.
  const double predicted = estimate_.Seconds(batch);
  data_.Decay(config_.forgetting);
  data_.Add(batch, seconds, weight / (predicted * predicted));
  effective_observations_ = effective_observations_ * config_.forgetting + weight;
}

void ComputeTimeModel::StartNewRegime() {
  std::vector<double> ratios;
  ratios.reserve(suspects_.size());
  for (const auto& [batch, seconds] : suspects_) {
    ratios.push_back(seconds / estimate_.Seconds(batch));
  }
  std::nth_element(ratios.begin(), ratios.begin() + ratios.size() / 2, ratios.end());
  // A slowdown scales the whole step (clocks, contention), so keep the shape, move the level.
  anchor_ = estimate_.Scaled(ratios[ratios.size() / 2]);
  estimate_ = anchor_;
  data_ = WeightedLineFit{};
  effective_observations_ = 0.0;
  for (const auto& [batch, seconds] : suspects_) AddPoint(batch, seconds, 1.0);
  observations_ = static_cast<int>(suspects_.size());
  suspects_.clear();
  suspect_side_ = 0;
  Refit();
}

void ComputeTimeModel::AdoptShape(LinearCost shape, double slope_error) {
  if (!(shape.seconds_per_sample > 0.0) || shape.fixed_seconds < 0.0) return;
  if (RelativeSlopeError(data_, noise_, estimate_.seconds_per_sample) <= slope_error) return;
  // Before the first report the level is unknown too: the shape's own level is the best guess
  // (the pool's), and the first report rescales it as it would the catalog prior.
  anchor_ = shape;
  identified_ = true;
  Refit();
}

double ComputeTimeModel::LevelError() const {
  if (effective_observations_ <= 0.0) return std::numeric_limits<double>::infinity();
  return noise_ / std::sqrt(effective_observations_);
}

void ComputeTimeModel::Refit() {
  estimate_ = Fit();
  if (RelativeSlopeError(data_, noise_, estimate_.seconds_per_sample) <=
          config_.identifiable_slope_error &&
      effective_observations_ >= config_.identifiable_observations) {
    identified_ = true;
    anchor_ = estimate_;
  }
}

LinearCost ComputeTimeModel::Fit() const {
  if (data_.total_weight() <= 0.0) return anchor_;
  // Level the anchor with the data, so it only decides the direction the data leaves open
  // (how a fixed batch's time splits into a and k·b).
  const double anchor_level = anchor_.fixed_seconds * data_.total_weight() +
                              anchor_.seconds_per_sample * data_.weighted_x();
  const LinearCost anchored = anchor_.Scaled(data_.weighted_y() / anchor_level);
  // Two pseudo-observations close together (±10%): they carry the shape's slope with little
  // weight, so real spread in the data outvotes them quickly.
  WeightedLineFit combined = data_;
  const double center = data_.mean_x();
  for (const double x : {0.9 * center, 1.1 * center}) {
    const double y = anchored.Seconds(x);
    combined.Add(x, y, 0.5 * config_.anchor_weight / (y * y));
  }
  std::optional<Line> line = combined.Solve();
  if (line && line->intercept < 0.0) line = combined.SolveThroughOrigin();
  if (!line || !(line->slope > 0.0)) return anchored;
  return {line->intercept, line->slope};
}

double RelativeSlopeError(const WeightedLineFit& data, double noise, double slope) {
  // Weights are 1/time², so the residuals are relative and their variance is noise²; the
  // slope's variance from the data alone is then noise² / Σ w (b − b̄)².
  const double slope_information = data.total_weight() * data.variance_x();
  if (!(slope_information > 0.0) || !(slope > 0.0)) return std::numeric_limits<double>::infinity();
  return noise / std::sqrt(slope_information) / slope;
}

}  // namespace fulcrum::balancer
