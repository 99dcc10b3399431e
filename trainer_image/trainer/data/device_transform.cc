#include "trainer_image/trainer/data/device_transform.h"

#include <vector>

#include "trainer_image/trainer/data/sample_order.h"

namespace fulcrum::trainer {
namespace {

// Through pinned memory and asynchronously: a copy from pageable memory makes the host wait
// for the device's queue to drain first (CUDA's rule for pageable sources), once per call, and
// the device then idles while the host launches the step's first kernels. The caching host
// allocator keeps the pinned block until the copy has read it.
torch::Tensor Upload(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

}  // namespace

Result<DeviceTransform> DeviceTransform::Make(const TransformOptions& options,
                                              std::span<const int64_t> sample_shape,
                                              torch::ScalarType input_type) {
  if (options.mean.size() != options.std.size())
    return InvalidArgument("--normalize-std", "needs one value per --normalize-mean value");
  if (!options.mean.empty()) {
    if (sample_shape.empty() || sample_shape[0] != static_cast<int64_t>(options.mean.size())) {
      return InvalidArgument("--normalize-mean",
                             "needs one value per channel (the sample's first dimension, " +
                                 (sample_shape.empty() ? std::string("none: a scalar")
                                                       : std::to_string(sample_shape[0])) +
                                 ")");
    }
    for (double deviation : options.std) {
      if (!(deviation > 0)) return InvalidArgument("--normalize-std", "values must be > 0");
    }
  }
  if (options.crop_padding < 0) return InvalidArgument("--random-crop-padding", "must be >= 0");
  if ((options.crop_padding > 0 || options.horizontal_flip) && sample_shape.size() != 3) {
    return InvalidArgument(options.crop_padding > 0 ? "--random-crop-padding" : "--horizontal-flip",
                           "applies to images, samples of shape [C, H, W]");
  }
  if (!(options.scale >= 0)) return InvalidArgument("--input-scale", "must be > 0 (0: default)");
  const bool integer = c10::isIntegralType(input_type, /*includeBool=*/true);
  const double scale = !integer                      ? 1.0
                       : options.scale > 0           ? options.scale
                       : input_type == torch::kUInt8 ? 1.0 / 255.0
                                                     : 1.0;
  // The normalisation's constants, made once: [1, C, 1, ...] float32 on the host, uploaded to
  // the batch's device each step.
  torch::Tensor mean, inverse_std;
  if (!options.mean.empty()) {
    std::vector<int64_t> shape(sample_shape.size() + 1, 1);
    shape[1] = static_cast<int64_t>(options.mean.size());
    const auto on = torch::TensorOptions(torch::kFloat64);
    mean = torch::tensor(options.mean, on).to(torch::kFloat32).view(shape);
    inverse_std = torch::tensor(options.std, on).reciprocal().to(torch::kFloat32).view(shape);
  }
  return DeviceTransform(options, scale, std::move(mean), std::move(inverse_std));
}

torch::Tensor DeviceTransform::Apply(const torch::Tensor& inputs, std::span<const int64_t> indices,
                                     int64_t first_position, int64_t dataset_size,
                                     bool augment) const {
  torch::Tensor x = inputs;
  if (augment && (options_.crop_padding > 0 || options_.horizontal_flip)) {
    // On the raw values (uint8 moves 4x fewer bytes than float).
    x = CropAndFlip(x, indices, first_position, dataset_size);
  }
  // Out of place: a float32 batch arrives as the loader's own tensor, which a retried step
  // (micro-steps after running out of memory) transforms again.
  x = x.to(torch::kFloat32);
  if (scale_ != 1.0) x = x * scale_;
  if (mean_.defined()) x = (x - Upload(mean_, x.device())) * Upload(inverse_std_, x.device());
  return x;
}

torch::Tensor DeviceTransform::CropAndFlip(const torch::Tensor& inputs,
                                           std::span<const int64_t> indices, int64_t first_position,
                                           int64_t dataset_size) const {
  const int64_t batch = inputs.size(0), channels = inputs.size(1);
  const int64_t height = inputs.size(2), width = inputs.size(3);
  const int64_t padding = options_.crop_padding;
  // Each sample's crop offset and flip, from its own (seed, epoch, index) stream.
  std::vector<int64_t> top(static_cast<std::size_t>(batch)), left(top.size()), flip(top.size());
  for (std::size_t k = 0; k < top.size(); ++k) {
    const int64_t epoch = (first_position + static_cast<int64_t>(k)) / dataset_size;
    uint64_t state = options_.seed * 0xD1B54A32D192ED03ULL ^
                     static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ULL ^
                     static_cast<uint64_t>(indices[k]) * 0xC2B2AE3D27D4EB4FULL;
    const auto span = static_cast<uint64_t>(2 * padding + 1);
    top[k] = static_cast<int64_t>(SplitMix64(state) % span);
    left[k] = static_cast<int64_t>(SplitMix64(state) % span);
    flip[k] = options_.horizontal_flip ? static_cast<int64_t>(SplitMix64(state) & 1) : 0;
  }
  const torch::Device device = inputs.device();
  auto on_device = [&](const std::vector<int64_t>& values) {
    return Upload(torch::tensor(values, torch::kInt64), device);
  };
  torch::Tensor padded =
      padding > 0 ? torch::constant_pad_nd(inputs, {padding, padding, padding, padding}, 0)
                  : inputs;
  const auto long_on = torch::TensorOptions(torch::kInt64).device(device);
  const torch::Tensor rows =
      on_device(top).view({batch, 1}) + torch::arange(height, long_on).view({1, height});
  torch::Tensor columns = torch::arange(width, long_on).view({1, width});
  columns = torch::where(on_device(flip).view({batch, 1}).to(torch::kBool), (width - 1) - columns,
                         columns) +
            on_device(left).view({batch, 1});
  // out[b, c, h, w] = padded[b, c, rows[b, h], columns[b, w]]
  return padded.index({torch::arange(batch, long_on).view({batch, 1, 1, 1}),
                       torch::arange(channels, long_on).view({1, channels, 1, 1}),
                       rows.view({batch, 1, height, 1}), columns.view({batch, 1, 1, width})});
}

}  // namespace fulcrum::trainer
