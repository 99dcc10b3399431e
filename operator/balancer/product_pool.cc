#include "operator/balancer/product_pool.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

namespace fulcrum::balancer {
namespace {

// For a Gaussian, the median of d² is 0.455 σ²: this turns a median of squares into a
// variance that one far-off member cannot inflate.
constexpr double kMedianOfSquaredNormal = 0.455;

double UpperMedian(std::vector<double> values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// The group's line: the members' estimates averaged with their precisions (1 / σ_i²).
LinearCost ReferenceLine(std::span<const ComputeTimeModel* const> members,
                         const std::vector<bool>& included, const std::vector<double>& error) {
  double weight = 0.0;
  LinearCost sum;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!included[i]) continue;
    const double precision = 1.0 / (error[i] * error[i]);
    sum.fixed_seconds += precision * members[i]->estimate().fixed_seconds;
    sum.seconds_per_sample += precision * members[i]->estimate().seconds_per_sample;
    weight += precision;
  }
  return sum.Scaled(1.0 / weight);
}

// log(own prediction / group's) where the member's data lie: its level relative to the group.
double LevelDeviation(const ComputeTimeModel& member, const LinearCost& reference) {
  const double batch = member.data().mean_x();
  return std::log(member.estimate().Seconds(batch) / reference.Seconds(batch));
}

// The shape all included members' data give together, with its relative slope error; nullopt
// until it pins k down.
std::optional<std::pair<LinearCost, double>> PooledShape(
    std::span<const ComputeTimeModel* const> members, const std::vector<bool>& included,
    const FitterConfig& fitter) {
  WeightedLineFit pooled;
  double observations = 0.0;
  std::vector<double> noise;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (!included[i]) continue;
    pooled.Merge(members[i]->data());
    observations += members[i]->effective_observations();
    noise.push_back(members[i]->noise());
  }
  if (noise.empty() || observations < fitter.identifiable_observations) return std::nullopt;
  std::optional<Line> line = pooled.Solve();
  if (line && line->intercept < 0.0) line = pooled.SolveThroughOrigin();
  if (!line || !(line->slope > 0.0)) return std::nullopt;
  const double slope_error = RelativeSlopeError(pooled, UpperMedian(noise), line->slope);
  if (slope_error > fitter.identifiable_slope_error) return std::nullopt;
  return std::pair{LinearCost{line->intercept, line->slope}, slope_error};
}

}  // namespace

PooledEstimate PoolSameProduct(std::span<const ComputeTimeModel* const> members,
                               const PoolConfig& pool, const FitterConfig& fitter) {
  const std::size_t n = members.size();
  PooledEstimate result;
  result.on_its_own.assign(n, false);
  std::vector<double> error(n);
  std::vector<bool> measured(n);
  for (std::size_t i = 0; i < n; ++i) {
    error[i] = members[i]->LevelError();
    measured[i] = std::isfinite(error[i]) && error[i] > 0.0;
  }
  if (std::count(measured.begin(), measured.end(), true) == 0) {
    for (const ComputeTimeModel* member : members) result.costs.push_back(member->estimate());
    return result;
  }

  // Two passes: the first reference may be pulled by a member that is apart; the second,
  // without such members, is the group's. The spread that decides who is apart comes from
  // medians, so the member in question cannot inflate it.
  std::vector<bool> included = measured;
  LinearCost reference;
  for (int pass = 0; pass < 2; ++pass) {
    reference = ReferenceLine(members, included, error);
    std::vector<double> squared_deviations;
    std::vector<double> variances;
    for (std::size_t i = 0; i < n; ++i) {
      if (!included[i]) continue;
      squared_deviations.push_back(std::pow(LevelDeviation(*members[i], reference), 2));
      variances.push_back(error[i] * error[i]);
    }
    const double robust_spread_squared =
        std::max(pool.min_spread * pool.min_spread,
                 UpperMedian(squared_deviations) / kMedianOfSquaredNormal - UpperMedian(variances));
    std::vector<bool> close(n, false);
    for (std::size_t i = 0; i < n; ++i) {
      close[i] = measured[i] &&
                 std::abs(LevelDeviation(*members[i], reference)) <=
                     pool.apart_sigmas * std::sqrt(robust_spread_squared + error[i] * error[i]);
    }
    if (std::count(close.begin(), close.end(), true) == 0) break;  // no majority: keep all
    included = close;
  }
  reference = ReferenceLine(members, included, error);

  // The spread used for shrinking: among the members that pool, what their deviations show
  // beyond their own noise (method of moments, on means: unbiased). A member's deviation is
  // from a reference it is part of, which hides about 1/m of the variance.
  double mean_squared_deviation = 0.0;
  double mean_variance = 0.0;
  const double pooled_members =
      static_cast<double>(std::count(included.begin(), included.end(), true));
  for (std::size_t i = 0; i < n; ++i) {
    if (!included[i]) continue;
    mean_squared_deviation += std::pow(LevelDeviation(*members[i], reference), 2) / pooled_members;
    mean_variance += error[i] * error[i] / pooled_members;
  }
  const double visible = pooled_members > 1.0 ? 1.0 - 1.0 / pooled_members : 1.0;
  const double spread_squared =
      std::max(pool.min_spread * pool.min_spread, mean_squared_deviation / visible - mean_variance);
  result.spread = std::sqrt(spread_squared);

  for (std::size_t i = 0; i < n; ++i) {
    const LinearCost& own = members[i]->estimate();
    if (!measured[i]) {
      result.costs.push_back(reference);  // a newcomer costs what its group does
      continue;
    }
    result.on_its_own[i] = !included[i];
    const double weight =
        included[i] ? spread_squared / (spread_squared + error[i] * error[i]) : 1.0;
    result.costs.push_back(
        {weight * own.fixed_seconds + (1 - weight) * reference.fixed_seconds,
         weight * own.seconds_per_sample + (1 - weight) * reference.seconds_per_sample});
  }
  if (auto shape = PooledShape(members, included, fitter)) {
    std::tie(result.shape, result.shape_slope_error) = *shape;
  }
  return result;
}

}  // namespace fulcrum::balancer
