// How a batch goes through the job's model under the model contract (docs/user-guide.md): its
// fields prepared on the device (the input field transformed, images in channels_last), forward
// and the loss under autocast, the module's own loss or the default cross-entropy; the check
// before step 1 that the model fits the data and its loss is a sum; and one worker's shard of an
// evaluation. No collectives and no step bookkeeping: the training loop owns those.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <span>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/data/dataset.h"
#include "trainer_image/trainer/data/device_transform.h"
#include "trainer_image/trainer/data/field_roles.h"
#include "trainer_image/trainer/loop/trainer_config.h"
#include "trainer_image/trainer/model/model.h"

namespace fulcrum::trainer {

// One worker's sums over its shard of the evaluation set.
struct EvaluationSums {
  double loss = 0.0;     // summed loss
  double correct = 0.0;  // top-1 hits, where `accuracy`
  int64_t samples = 0;
  bool accuracy = false;  // forward returned class scores against a class label
};

class ModelRunner {
 public:
  // Sets up the input transform (errors name the flag) and the autocast type; `model` is on
  // `device`, bound to `dataset`'s fields, and outlives the runner.
  static Result<ModelRunner> Make(TrainingModel& model, const Dataset& dataset, FieldRoles roles,
                                  const TrainerConfig& config, torch::Device device);

  // Samples [first, last) of every field, the input field transformed (augment false: no
  // random crop or flip, for evaluation); `indices` are those samples' dataset indices and
  // `position` the first one's global position (its epoch seeds the augmentation).
  std::vector<torch::Tensor> Fields(const Batch& batch, std::span<const int64_t> indices,
                                    int64_t first, int64_t last, int64_t position,
                                    bool augment = true) const;
  // Forward and the loss under autocast; the loss summed over the samples, in float32.
  torch::Tensor ForwardLoss(const std::vector<torch::Tensor>& fields) const;
  // Before step 1, in eval mode and float32: forward and the loss run on the dataset's first
  // samples, and a loss method is a sum (the loss of 8 samples equals the sum of its halves').
  Status Probe(Dataset& dataset) const;
  // Evaluates samples [first, last) of `dataset` in chunks of `batch_size`, in eval mode.
  EvaluationSums Evaluate(Dataset& dataset, int64_t first, int64_t last, int batch_size) const;

 private:
  ModelRunner(TrainingModel& model, FieldRoles roles, std::optional<DeviceTransform> transform,
              std::optional<c10::ScalarType> autocast, bool channels_last, torch::Device device,
              int64_t dataset_size)
      : model_(&model),
        roles_(roles),
        transform_(std::move(transform)),
        autocast_(autocast),
        channels_last_(channels_last),
        device_(device),
        dataset_size_(dataset_size) {}
  torch::Tensor Loss(const c10::IValue& outputs, const std::vector<torch::Tensor>& fields) const;
  Batch OnDevice(Dataset& dataset, std::span<const int64_t> indices) const;

  TrainingModel* model_;
  FieldRoles roles_;
  std::optional<DeviceTransform> transform_;  // set where the input field is transformed
  std::optional<c10::ScalarType> autocast_;   // mixed precision: forward and loss in it
  bool channels_last_;
  torch::Device device_;
  int64_t dataset_size_;  // the training set's: augmentation seeds count its epochs
};

// A torch or TorchScript error on one line, without the C++ backtrace: from its last "Error: "
// on (the interpreter puts the cause last), at most 400 characters.
std::string ShortError(const std::exception& error);

}  // namespace fulcrum::trainer
