// The model fulcrum-trainer trains, behind one interface: a built-in network
// (builtin_models.h) or the user's TorchScript module (scripted_model.h, the model contract of
// docs/user-guide.md). Forward takes the batch's fields; a module may bring its own loss.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/data/field_roles.h"
#include "trainer_image/trainer/model/model_options.h"

namespace fulcrum::trainer {

struct NamedTensor {
  std::string name;  // as in the module's state_dict ("layer1.0.conv1.weight")
  torch::Tensor tensor;
};

class TrainingModel {
 public:
  virtual ~TrainingModel() = default;
  // Every parameter, trained (requires_grad) or frozen, and every buffer (BatchNorm running
  // statistics), in the module's own order, named as in its state_dict.
  virtual std::vector<NamedTensor> NamedParameters() = 0;
  virtual std::vector<NamedTensor> NamedBuffers() = 0;
  // Matches forward's (and loss's) arguments to the dataset's fields, once before training;
  // errors name the argument, the field and the flag.
  virtual Status Bind(const std::vector<DataField>& fields, const FieldRoles& roles) = 0;
  // `batch`: every field [b, ...] on the device, in the dataset's field order, the input field
  // transformed. Returns whatever forward returns (class logits for the default loss).
  virtual c10::IValue Forward(const std::vector<torch::Tensor>& batch) = 0;
  // The module's own loss method: the sum over the batch's samples, a 0-dim tensor. Without
  // one, the trainer's default (summed cross-entropy against the label field) applies.
  virtual bool HasLoss() const { return false; }
  virtual torch::Tensor Loss(const c10::IValue& outputs, const std::vector<torch::Tensor>& batch);
  virtual void To(const torch::Device& device) = 0;  // moves parameters and buffers
  virtual void SetTraining(bool training) = 0;
  // Writes the trained module: TorchScript for a user's module (torch.jit.load reads it, with
  // the user's own state_dict names); a built-in network's parameters and buffers otherwise.
  virtual Status Save(const std::string& path) = 0;
};

// Parameters are initialised from options.seed, so every rank starts from the same point even
// before rank 0's broadcast.
Result<std::unique_ptr<TrainingModel>> MakeModel(const ModelOptions& options);

}  // namespace fulcrum::trainer
