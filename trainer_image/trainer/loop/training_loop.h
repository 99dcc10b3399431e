// fulcrum-trainer's main loop: join a generation, agree on state, train steps with this
// rank's batch, all-reduce weighted gradients, apply new batches in place, and move to the
// next generation (or stop) when membership changes. Torch-free header.
#pragma once

#include <atomic>

#include "trainer_image/trainer/loop/trainer_config.h"

namespace fulcrum::trainer {

// Exit code: 0 finished or stopped, 1 failed, 2 invalid input or refused by the coordinator, 3
// (kDivergedExitCode) the loss stayed non-finite for --max-nonfinite-steps steps.
inline constexpr int kDivergedExitCode = 3;
// `stop_signal` becomes non-zero on SIGTERM/SIGINT: checkpoint after the step and exit 0.
int RunTrainer(const TrainerConfig& config, const std::atomic<int>& stop_signal);

}  // namespace fulcrum::trainer
