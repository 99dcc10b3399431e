#include "operator/balancer/cost_curve.h"

#include <algorithm>
#include <cmath>

namespace fulcrum::balancer {

std::vector<CostPoint> MonotoneCostPoints(std::vector<CostPoint> points) {
  std::erase_if(points, [](const CostPoint& point) {
    return point.batch <= 0 || !(point.seconds > 0.0) || !std::isfinite(point.seconds);
  });
  std::sort(points.begin(), points.end(), [](const CostPoint& x, const CostPoint& y) {
    return x.batch != y.batch ? x.batch < y.batch : x.seconds < y.seconds;
  });
  points.erase(
      std::unique(points.begin(), points.end(),
                  [](const CostPoint& x, const CostPoint& y) { return x.batch == y.batch; }),
      points.end());
  for (std::size_t i = points.size(); i-- > 1;) {
    points[i - 1].seconds = std::min(points[i - 1].seconds, points[i].seconds);
  }
  return points;
}

double CurveSeconds(double fixed_seconds, double seconds_per_sample,
                    std::span<const CostPoint> points, double batch) {
  if (points.empty()) return fixed_seconds + seconds_per_sample * batch;
  const auto above =
      std::lower_bound(points.begin(), points.end(), batch,
                       [](const CostPoint& point, double value) { return point.batch < value; });
  if (above == points.end()) {
    const CostPoint& last = points.back();
    return last.seconds + seconds_per_sample * (batch - last.batch);
  }
  if (above->batch == batch) return above->seconds;
  if (above != points.begin()) {
    const CostPoint& below = *(above - 1);
    const double fraction = (batch - below.batch) / (above->batch - below.batch);
    return below.seconds + fraction * (above->seconds - below.seconds);
  }
  const CostPoint& first = points.front();
  double slope = seconds_per_sample;
  if (points.size() >= 2) {
    const CostPoint& second = points[1];
    slope = std::clamp((second.seconds - first.seconds) / (second.batch - first.batch), 0.0,
                       seconds_per_sample);
  }
  return std::max(first.seconds - slope * (first.batch - batch),
                  first.seconds * batch / first.batch);
}

}  // namespace fulcrum::balancer
