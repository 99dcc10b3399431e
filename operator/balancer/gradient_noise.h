// The gradient noise scale B_noise = tr Σ / |G|² of a running job, from the gradient statistics
// its trainers report (docs/adaptive-batch.md). Pure: observations in, estimate out.
//
// With ĝ_b the mean gradient over b samples, E|ĝ_b|² = |G|² + tr Σ / b (McCandlish et al. 2018,
// "An Empirical Model of Large-Batch Training"; Pollux, OSDI '21). Every committed step gives one
// observation per rank, its local batch b_i and |ĝ_i|² taken before the all-reduce, and one for
// the aggregated gradient over the global batch B. Unequal local batches (Cannikin) spread the
// points in x = 1/b within a single step, so a line y = |G|² + tr Σ · x fitted by weighted least
// squares over the ranks and the recent steps gives |G|² (intercept) and tr Σ (slope). Weights
// are b²: when noise dominates, Var |ĝ_b|² falls as 1/b², so each point counts by its precision.
// Old steps fade with a half-life, so the estimate follows the noise scale as training goes on
// (it typically grows by orders of magnitude).
#pragma once

#include <optional>
#include <span>

#include "operator/balancer/weighted_line_fit.h"

namespace fulcrum::balancer {

struct GradientObservation {
  int batch = 0;              // samples the gradient is the mean over
  double squared_norm = 0.0;  // |ĝ|² of that mean gradient
};

struct GradientNoiseEstimate {
  double gradient_squared = 0.0;  // |G|², the true gradient's squared norm
  double trace_sigma = 0.0;       // tr Σ, the per-sample gradient's total variance
  double noise_scale = 0.0;       // B_noise = tr Σ / |G|²: the batch where noise equals signal
  double steps = 0.0;             // the steps behind it, counted with their fading weights
};

class GradientNoiseModel {
 public:
  // `half_life_steps`: after that many steps an observation weighs half as much.
  explicit GradientNoiseModel(double half_life_steps = 100.0);

  // One committed step: every rank's (b_i, |ĝ_i|²) and the aggregated (B, |ĝ|²). Observations
  // with no samples, or a norm that is not finite and non-negative, are left out.
  void ObserveStep(std::span<const GradientObservation> ranks, GradientObservation global);

  // nullopt until the points span two batch sizes, or while the fitted |G|² or tr Σ is not
  // positive (too few steps to tell signal from noise).
  std::optional<GradientNoiseEstimate> Estimate() const;

  void Reset();

 private:
  double decay_;
  WeightedLineFit fit_;
  double steps_ = 0.0;
};

}  // namespace fulcrum::balancer
