// Training data by sample index, so any rank can produce any sample: a packed dataset
// (packed_dataset.h), a deterministic synthetic task (each sample generated from its index) or
// a file of fixed-size records.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/data/dataset_options.h"

namespace fulcrum::trainer {

struct Batch {
  torch::Tensor inputs;   // [b, ...] in the dataset's dtype (uint8 images: device_transform.h)
  torch::Tensor targets;  // [b] int64 class labels
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // One sample's input: its shape (without the batch dimension) and element type.
  virtual std::vector<int64_t> sample_shape() const = 0;
  virtual torch::ScalarType input_type() const = 0;
  // The label's class count where the data declares it (a packed dataset's "classes").
  virtual std::optional<int64_t> classes() const { return std::nullopt; }
  virtual Batch Get(std::span<const int64_t> indices) = 0;
};

Result<std::unique_ptr<Dataset>> MakeDataset(const DatasetOptions& options);

}  // namespace fulcrum::trainer
