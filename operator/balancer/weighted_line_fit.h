// Weighted least squares for a line y = intercept + slope·x from running sums, with
// exponential forgetting. Shared by the compute-time fitter and the memory model.
#pragma once

#include <optional>

namespace fulcrum::balancer {

struct Line {
  double intercept = 0.0;
  double slope = 0.0;
  double At(double x) const { return intercept + slope * x; }
};

class WeightedLineFit {
 public:
  void Add(double x, double y, double weight);
  // Adds every point of `other` (pooling data from several sources).
  void Merge(const WeightedLineFit& other);
  // Multiplies every past weight by `factor` (0 < factor <= 1): old points fade out.
  void Decay(double factor);

  double total_weight() const { return weight_; }
  double mean_x() const { return weight_ > 0.0 ? weighted_x_ / weight_ : 0.0; }
  double variance_x() const;
  double weighted_y() const { return weighted_y_; }
  double weighted_x() const { return weighted_x_; }

  // The least-squares line; nullopt with fewer than two distinct x values.
  std::optional<Line> Solve() const;
  // The least-squares line through the origin (intercept fixed at 0); nullopt without data.
  std::optional<Line> SolveThroughOrigin() const;

 private:
  double weight_ = 0.0;
  double weighted_x_ = 0.0;
  double weighted_xx_ = 0.0;
  double weighted_y_ = 0.0;
  double weighted_xy_ = 0.0;
};

}  // namespace fulcrum::balancer
