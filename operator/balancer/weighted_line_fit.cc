#include "operator/balancer/weighted_line_fit.h"

#include <algorithm>

namespace fulcrum::balancer {

void WeightedLineFit::Add(double x, double y, double weight) {
  weight_ += weight;
  weighted_x_ += weight * x;
  weighted_xx_ += weight * x * x;
  weighted_y_ += weight * y;
  weighted_xy_ += weight * x * y;
}

void WeightedLineFit::Merge(const WeightedLineFit& other) {
  weight_ += other.weight_;
  weighted_x_ += other.weighted_x_;
  weighted_xx_ += other.weighted_xx_;
  weighted_y_ += other.weighted_y_;
  weighted_xy_ += other.weighted_xy_;
}

void WeightedLineFit::Decay(double factor) {
  weight_ *= factor;
  weighted_x_ *= factor;
  weighted_xx_ *= factor;
  weighted_y_ *= factor;
  weighted_xy_ *= factor;
}

double WeightedLineFit::variance_x() const {
  if (weight_ <= 0.0) return 0.0;
  const double mean = weighted_x_ / weight_;
  return std::max(0.0, weighted_xx_ / weight_ - mean * mean);
}

std::optional<Line> WeightedLineFit::Solve() const {
  const double determinant = weight_ * weighted_xx_ - weighted_x_ * weighted_x_;
  // Relative test: the x spread must be distinguishable from rounding in the sums.
  if (weight_ <= 0.0 || determinant <= 1e-12 * weight_ * weighted_xx_) return std::nullopt;
  const double slope = (weight_ * weighted_xy_ - weighted_x_ * weighted_y_) / determinant;
  return Line{(weighted_y_ - slope * weighted_x_) / weight_, slope};
}

std::optional<Line> WeightedLineFit::SolveThroughOrigin() const {
  if (weighted_xx_ <= 0.0) return std::nullopt;
  return Line{0.0, weighted_xy_ / weighted_xx_};
}

}  // namespace fulcrum::balancer
