// SGD with momentum (Nesterov optional), Adam and AdamW, each with weight decay, over an explicit
// list of state tensors, so the state can be broadcast to newcomers and checkpointed byte for
// byte (it survives membership changes). The same formulas as PyTorch's torch.optim.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "trainer_image/trainer/model/optimizer_options.h"

namespace fulcrum::trainer {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // p <- update(p, g) at this step's learning rate (learning_rate_schedule.h), g the global mean
  // gradient of p, one per parameter and laid out as it. Every update is element-wise, so an
  // optimizer made over slices of a flat parameter buffer, given the same slices of the flat
  // gradients, makes the same update on them (a shard's update under --sharding).
  virtual void Step(const std::vector<torch::Tensor>& parameters,
                    const std::vector<torch::Tensor>& gradients, double learning_rate) = 0;
  // Every tensor of state, in a fixed order (float64 scalars included as 1-element tensors).
  virtual std::vector<torch::Tensor> State() = 0;
  // State()'s names, as checkpoints carry them: "<slot>/<parameter>" (slots as PyTorch's
  // optimizers call them: momentum_buffer, exp_avg, exp_avg_sq) or "<slot>" for a global.
  virtual std::vector<std::string> StateNames(
      const std::vector<std::string>& parameter_names) const = 0;
};

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options,
                                         const std::vector<torch::Tensor>& parameters);

}  // namespace fulcrum::trainer
