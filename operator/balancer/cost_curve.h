// A worker's compute time as a function of its batch when some sizes were measured: the
// measured times at those sizes, straight lines between them, and beyond them the fitted line
// c(b) = a + k·b only for its slope. Measured costs beat the line wherever they exist (the line
// mixes every size's data and cannot see a device that is flat below a minimum efficient
// batch); the line only interpolates and extrapolates. Pure arithmetic.
#pragma once

#include <span>
#include <vector>

namespace fulcrum::balancer {

struct CostPoint {
  int batch = 0;         // > 0
  double seconds = 0.0;  // > 0, finite
  bool operator==(const CostPoint&) const = default;
};

// Sorted by batch, one point per batch, and made nondecreasing (a point above a bigger
// batch's time is lowered to it: a batch never costs more than a bigger one, which
// MinimumUsefulBatch enforces on the plan, and which the exact split needs). Points with a
// non-positive batch or time are dropped.
std::vector<CostPoint> MonotoneCostPoints(std::vector<CostPoint> points);

// c(batch) for the line (fixed_seconds, seconds_per_sample) and `points` (as returned by
// MonotoneCostPoints): a point's time at its batch, linear between points, the line's slope
// above the last point; below the first, the slope of the first two points clamped to
// [0, seconds_per_sample] (flat below a knee, the line's slope at most), and never below the
// first point's time scaled down in proportion. The line itself when `points` is empty.
// Nondecreasing in batch.
double CurveSeconds(double fixed_seconds, double seconds_per_sample,
                    std::span<const CostPoint> points, double batch);

}  // namespace fulcrum::balancer
