// Training data by sample index, so any rank can produce any sample: a deterministic
// synthetic task (each sample generated from its index) or a file of fixed-size records.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <span>

#include "common/result.h"
#include "trainer_image/trainer/trainer_flags.h"

namespace fulcrum::trainer {

struct Batch {
  torch::Tensor inputs;   // [b, ...] float32
  torch::Tensor targets;  // [b] int64 class labels
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Batch Get(std::span<const int64_t> indices) = 0;
};

// Synthetic: x_i ~ N(0, 1) from SplitMix64(seed, i); label = argmax(W x_i) for a fixed
// teacher W drawn from the seed, so the task is learnable. Shape follows the model:
// [input_features] for the MLP, [3, S, S] for the CNN. Records: --record-features float32
// values then one int32 label, little-endian, back to back.
Result<std::unique_ptr<Dataset>> MakeDataset(const TrainerFlags& flags);

}  // namespace fulcrum::trainer
