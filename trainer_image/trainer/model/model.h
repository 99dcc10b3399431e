// The models fulcrum-trainer trains: built-in MLP and small ResNet-like CNN, or a user
// TorchScript module. Each maps a batch of inputs to class logits.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/model/model_options.h"

namespace fulcrum::trainer {

class TrainingModel {
 public:
  virtual ~TrainingModel() = default;
  virtual std::vector<torch::Tensor> Parameters() = 0;  // trained, all-reduced, identical on ranks
  virtual std::vector<torch::Tensor> Buffers() = 0;     // e.g. BatchNorm running statistics
  virtual torch::Tensor Forward(const torch::Tensor& inputs) = 0;  // [b, ...] -> [b, classes]
  virtual void To(const torch::Device& device) = 0;                // moves parameters and buffers
};

// Parameters are initialised from options.seed, so every rank starts from the same point even
// before rank 0's broadcast.
Result<std::unique_ptr<TrainingModel>> MakeModel(const ModelOptions& options);

}  // namespace fulcrum::trainer
