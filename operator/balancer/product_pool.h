// Pools the evidence of workers with the same GPU product (a hierarchical estimate). Such
// workers run the same kernels on the same silicon, so their costs differ by a few percent at
// most, unless something sets one apart (throttling, a noisy neighbour, a slow host). Alone,
// each worker's model rests on its own few noisy reports; pooled:
//  - the shape (a : k) is fitted from all members' data at once, so it is pinned down long
//    before any single worker's dither would pin it;
//  - each worker's cost is shrunk toward the group's, by how little its own data say
//    (weight τ² / (τ² + σ_i²): σ_i its own standard error, τ the spread of true costs within
//    the group, estimated from the members and never assumed below `min_spread`);
//  - a worker whose level is further from the group's than noise and spread explain is on its
//    own: it keeps its own estimate and does not pull the group's.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "operator/balancer/performance_model.h"

namespace fulcrum::balancer {

struct PoolConfig {
  // Least relative spread of true costs assumed among same-product workers (clocks, cooling,
  // host): a worker's own evidence always keeps some weight.
  double min_spread = 0.01;
  // A worker whose level is beyond this many standard deviations from its group's is on its own.
  double apart_sigmas = 3.0;
};

struct PooledEstimate {
  std::vector<LinearCost> costs;  // per member, in order: what planning should use
  std::vector<bool> on_its_own;   // per member: too far from the group to pool
  // The members' common shape, once their pooled data pin k down as the fitter requires of
  // one worker's (FitterConfig::identifiable_*).
  std::optional<LinearCost> shape;
  double shape_slope_error = 0.0;  // relative standard error of the shape's k
  double spread = 0.0;  // τ: the spread of true levels within the group used for shrinking
};

PooledEstimate PoolSameProduct(std::span<const ComputeTimeModel* const> members,
                               const PoolConfig& pool, const FitterConfig& fitter);

}  // namespace fulcrum::balancer
