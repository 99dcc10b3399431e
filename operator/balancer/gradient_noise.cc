#include "operator/balancer/gradient_noise.h"

#include <cmath>

namespace fulcrum::balancer {

GradientNoiseModel::GradientNoiseModel(double half_life_steps)
    : decay_(half_life_steps > 0.0 ? std::exp2(-1.0 / half_life_steps) : 0.0) {}

void GradientNoiseModel::ObserveStep(std::span<const GradientObservation> ranks,
                                     GradientObservation global) {
  fit_.Decay(decay_);
  steps_ = steps_ * decay_ + 1.0;
  auto add = [this](const GradientObservation& observation) {
    if (observation.batch <= 0 || !std::isfinite(observation.squared_norm) ||
        observation.squared_norm < 0.0) {
      return;
    }
    const double batch = observation.batch;
    fit_.Add(1.0 / batch, observation.squared_norm, batch * batch);
  };
  for (const GradientObservation& rank : ranks) add(rank);
  add(global);
}

std::optional<GradientNoiseEstimate> GradientNoiseModel::Estimate() const {
  const std::optional<Line> line = fit_.Solve();
  if (!line || !(line->intercept > 0.0) || !(line->slope > 0.0)) return std::nullopt;
  return GradientNoiseEstimate{.gradient_squared = line->intercept,
                               .trace_sigma = line->slope,
                               .noise_scale = line->slope / line->intercept,
                               .steps = steps_};
}

void GradientNoiseModel::Reset() {
  fit_ = WeightedLineFit{};
  steps_ = 0.0;
}

}  // namespace fulcrum::balancer
