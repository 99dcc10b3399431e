#include "operator/balancer/adaptive_batch.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace fulcrum::balancer {
namespace {

// Candidates per factor of two: fine enough that the best is within ~3% of the true optimum,
// few enough that each decision costs tens of splits.
constexpr int kCandidatesPerOctave = 24;

std::optional<double> Goodput(double noise_scale, int base_batch, int batch,
                              const SplitStepSeconds& step_seconds) {
  const std::optional<double> seconds = step_seconds(batch);
  if (!seconds || !(*seconds > 0.0)) return std::nullopt;
  return batch / *seconds * StatisticalEfficiency(noise_scale, base_batch, batch);
}

std::string Format(double value) {
  std::ostringstream text;
  text.precision(4);
  text << value;
  return text.str();
}

}  // namespace

double StatisticalEfficiency(double noise_scale, int base_batch, int batch) {
  return (noise_scale + base_batch) / (noise_scale + batch);
}

double ScaledLearningRate(LearningRateScaling rule, double base_learning_rate, int base_batch,
                          int batch, double noise_scale) {
  const double scale = static_cast<double>(batch) / base_batch;
  if (rule == LearningRateScaling::kSquareRoot) return base_learning_rate * std::sqrt(scale);
  return base_learning_rate * scale * StatisticalEfficiency(noise_scale, base_batch, batch);
}

BatchDecision DecideGlobalBatch(const AdaptiveBatchOptions& options, int current_batch,
                                int64_t steps_since_change, double noise_scale,
                                const SplitStepSeconds& step_seconds) {
  BatchDecision decision;
  decision.batch = current_batch;
  const std::optional<double> current =
      Goodput(noise_scale, options.base_batch, current_batch, step_seconds);
  decision.current_goodput = current.value_or(0.0);
  decision.goodput = decision.current_goodput;
  const bool outside = current_batch < options.min_batch || current_batch > options.max_batch;
  if (!outside && steps_since_change < options.min_steps_between_changes) {
    decision.reason = "unchanged: " + std::to_string(steps_since_change) + " of " +
                      std::to_string(options.min_steps_between_changes) +
                      " steps since the last change";
    return decision;
  }
  // The reachable range: within max_factor of the current B (unless it must come inside the
  // bounds), and inside [min, max].
  const double factor = std::max(1.0, options.max_factor);
  int low = options.min_batch;
  int high = options.max_batch;
  if (!outside) {
    low = std::max(low, static_cast<int>(std::ceil(current_batch / factor)));
    high = std::min(high, static_cast<int>(std::floor(current_batch * factor)));
  }
  std::set<int> candidates = {low, high};
  if (!outside) candidates.insert(current_batch);
  const double ratio = std::exp2(1.0 / kCandidatesPerOctave);
  for (double batch = low; batch < high; batch *= ratio) {
    candidates.insert(static_cast<int>(std::lround(batch)));
  }
  int best = outside ? 0 : current_batch;
  double best_goodput = outside ? 0.0 : decision.current_goodput;
  for (int batch : candidates) {
    if (batch < low || batch > high) continue;
    const std::optional<double> goodput =
        Goodput(noise_scale, options.base_batch, batch, step_seconds);
    if (goodput && *goodput > best_goodput) {
      best = batch;
      best_goodput = *goodput;
    }
  }
  if (best == 0) {
    decision.reason = "unchanged: no split exists for a global batch in [" + std::to_string(low) +
                      ", " + std::to_string(high) + "]";
    return decision;
  }
  const double gain =
      decision.current_goodput > 0.0 ? best_goodput / decision.current_goodput - 1.0 : 1.0;
  if (!outside && (best == current_batch || gain < options.min_gain)) {
    decision.reason = "unchanged: the best B, " + std::to_string(best) + ", gains " +
                      Format(100.0 * gain) + "% < " + Format(100.0 * options.min_gain) + "%";
    return decision;
  }
  decision.batch = best;
  decision.changed = best != current_batch;
  decision.goodput = best_goodput;
  decision.reason = (outside ? "global batch " + std::to_string(current_batch) + " outside [" +
                                   std::to_string(options.min_batch) + ", " +
                                   std::to_string(options.max_batch) + "]: "
                             : std::string()) +
                    "B " + std::to_string(current_batch) + " -> " + std::to_string(best) +
                    ": goodput " + Format(decision.current_goodput) + " -> " +
                    Format(best_goodput) + " samples/s at B0 (noise scale " + Format(noise_scale) +
                    ")";
  return decision;
}

}  // namespace fulcrum::balancer
