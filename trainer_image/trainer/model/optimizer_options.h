// The update rule and its settings. Torch-free (see model_options.h).
#pragma once

namespace fulcrum::trainer {

enum class OptimizerKind { kSgd, kAdam, kAdamW };

struct OptimizerOptions {
  OptimizerKind kind = OptimizerKind::kSgd;
  double learning_rate = 0.05;  // the base rate; the schedule sets each step's
  double momentum = 0.9;        // SGD only
  bool nesterov = false;        // SGD only, with momentum > 0
  // SGD and Adam: an L2 term (weight_decay * p added to the gradient), as PyTorch's. AdamW:
  // decoupled (p <- p * (1 - lr * weight_decay) before the update), as PyTorch's AdamW.
  double weight_decay = 0.0;
};

}  // namespace fulcrum::trainer
