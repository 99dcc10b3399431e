// The update rule and its settings. Torch-free (see model_options.h).
#pragma once

namespace fulcrum::trainer {

enum class OptimizerKind { kSgd, kAdam };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 0.05;
  double momentum = 0.9;  // SGD only
};

}  // namespace fulcrum::trainer
