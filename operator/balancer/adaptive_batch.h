// Adaptive global batch: the B that trains fastest per second of wall time, and the learning
// rate that goes with it (docs/adaptive-batch.md). Pure: the noise scale and the optimal split's
// step time in, a decision out.
//
// Goodput (Pollux, OSDI '21) is throughput times statistical efficiency: B / T*(B) samples a
// second, each worth E(B) = (B_noise + B0) / (B_noise + B) of a sample at the base batch B0,
// where B_noise is the gradient noise scale (gradient_noise.h) and T*(B) the step time of the
// optimal per-worker split of B (Cannikin: the heterogeneous split is part of the choice, and
// the exact split is fast enough to scan). A larger B is worth it while the noise is large
// against the signal; early in training (small B_noise) it wastes samples.
//
// Changes are damped: at most one per `min_steps_between_changes`, by at most `max_factor`
// either way, and only for a predicted gain of `min_gain` or more, so B does not follow noise in
// the estimate. A B outside [min_batch, max_batch] (the bounds were edited) is brought inside at
// once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace fulcrum::balancer {

struct AdaptiveBatchOptions {
  int min_batch = 1;
  int max_batch = 1;
  int base_batch = 1;  // B0: the batch the job's learning rate is for (spec.globalBatchSize)
  int64_t min_steps_between_changes = 100;
  // x4, not x2: the dwell and min_gain already keep B from following noise in the estimate, and
  // each factor of the bound is a dwell spent climbing. In adaptive_batch_bench.py (MNIST,
  // CPU, emulated speeds) x2 took 32 -> 512 in 4-6 changes and reached the target in 0.76x the
  // fixed B's time; x4 in 3-4 changes, 0.61x (docs/benchmarks.md).
  double max_factor = 4.0;
  double min_gain = 0.05;
};

// E(B) = (B_noise + B0) / (B_noise + B): a sample's worth at batch B against one at B0.
double StatisticalEfficiency(double noise_scale, int base_batch, int batch);

// How the learning rate follows B. kAdaScale (Pollux's): the gain r = (B / B0)·E(B), between 1
// and B / B0, large where noise dominates (a larger batch is then nearly a free larger step);
// kSquareRoot: sqrt(B / B0), independent of the noise.
enum class LearningRateScaling { kAdaScale, kSquareRoot };
double ScaledLearningRate(LearningRateScaling rule, double base_learning_rate, int base_batch,
                          int batch, double noise_scale);

struct BatchDecision {
  int batch = 0;  // the B to train with (the current one when unchanged)
  bool changed = false;
  double goodput = 0.0;          // predicted at `batch`, in base-batch samples per second
  double current_goodput = 0.0;  // predicted at the current B
  std::string reason;            // why, for the log and the Event
};

// The step time of the optimal split of a global batch B under the current per-worker costs,
// or nullopt where no split exists (B beyond what the workers' memory holds).
using SplitStepSeconds = std::function<std::optional<double>(int batch)>;

BatchDecision DecideGlobalBatch(const AdaptiveBatchOptions& options, int current_batch,
                                int64_t steps_since_change, double noise_scale,
                                const SplitStepSeconds& step_seconds);

}  // namespace fulcrum::balancer
