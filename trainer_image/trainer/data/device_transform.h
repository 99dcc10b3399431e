// Applies a job's TransformOptions to a batch already on its device: cast and scale, per-channel
// normalisation, random crop with padding and horizontal flip, as one gather and a few
// element-wise kernels. The random choices are drawn on the host per (seed, epoch, sample index),
// so they are the same whichever worker reads a sample and however the batch is split.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <span>

#include "common/result.h"
#include "trainer_image/trainer/data/transform_options.h"

namespace fulcrum::trainer {

class DeviceTransform {
 public:
  // Checks the options against one sample's shape and dtype (channels for mean/std, [C, H, W]
  // for crop and flip). Errors name the flag.
  static Result<DeviceTransform> Make(const TransformOptions& options,
                                      std::span<const int64_t> sample_shape,
                                      torch::ScalarType input_type);

  // `inputs` [b, ...] on the device; sample k of it is sample indices[k] of the dataset at
  // global position first_position + k (so of epoch (first_position + k) / dataset_size).
  // augment false (evaluation): cast, scale and normalise only, no random crop or flip.
  torch::Tensor Apply(const torch::Tensor& inputs, std::span<const int64_t> indices,
                      int64_t first_position, int64_t dataset_size, bool augment = true) const;

 private:
  DeviceTransform(TransformOptions options, double scale, torch::Tensor mean,
                  torch::Tensor inverse_std)
      : options_(std::move(options)),
        scale_(scale),
        mean_(std::move(mean)),
        inverse_std_(std::move(inverse_std)) {}
  torch::Tensor CropAndFlip(const torch::Tensor& inputs, std::span<const int64_t> indices,
                            int64_t first_position, int64_t dataset_size) const;

  TransformOptions options_;
  double scale_;
  // Per-channel normalisation on the host, [1, C, 1, ...]; undefined without one.
  torch::Tensor mean_;
  torch::Tensor inverse_std_;
};

}  // namespace fulcrum::trainer
