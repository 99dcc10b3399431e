#include "trainer_image/trainer/loop/model_runner.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "trainer_image/trainer/model/autocast.h"

namespace fulcrum::trainer {

std::string ShortError(const std::exception& error) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&error);
  std::string text = torch_error ? torch_error->what_without_backtrace() : error.what();
  if (const auto cause = text.rfind("Error: "); cause != std::string::npos) {
    const auto start = text.rfind('\n', cause);
    text = text.substr(start == std::string::npos ? 0 : start + 1);
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > 400) {
    text.resize(400);
    text.append("...");
  }
  return text;
}

Result<ModelRunner> ModelRunner::Make(TrainingModel& model, const Dataset& dataset,
                                      FieldRoles roles, const TrainerConfig& config,
                                      torch::Device device) {
  std::optional<c10::ScalarType> autocast;
  if (config.precision.precision == Precision::kBFloat16) autocast = torch::kBFloat16;
  // libtorch's CPU autocast has no float16: there the loss scaling runs on float32 compute.
  if (config.precision.precision == Precision::kFloat16 && device.is_cuda())
    autocast = torch::kHalf;
  const TransformOptions& options = config.transform;
  const bool requested = options.scale > 0 || !options.mean.empty() || options.crop_padding > 0 ||
                         options.horizontal_flip;
  std::optional<DeviceTransform> transform;
  if (!roles.input && requested) {
    return InvalidArgument("--input-field",
                           "is required: the input transforms apply to one field "
                           "and the dataset has " +
                               std::to_string(dataset.fields().size()) + " (" +
                               dataset.FieldNames() + ")");
  }
  if (roles.input) {
    const DataField& input = dataset.fields()[*roles.input];
    // Built-in networks take float32; a user's module takes images (uint8) and features
    // (floats) as float32 too, but token ids and masks (other integers) as stored unless a
    // transform is asked for.
    if (config.model.kind != ModelKind::kTorchScript || input.type == torch::kUInt8 ||
        c10::isFloatingType(input.type) || requested) {
      Result<DeviceTransform> made = DeviceTransform::Make(options, input.shape, input.type);
      if (!made.ok()) return made.error();
      transform = std::move(*made);
    }
  }
  if (config.precision.channels_last) {
    torch::NoGradGuard no_grad;
    // In place, so the module keeps the same tensors (and TorchScript its attributes).
    for (const NamedTensor& parameter : model.NamedParameters()) {
      if (parameter.tensor.dim() == 4)
        parameter.tensor.set_data(parameter.tensor.contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
  return ModelRunner(model, roles, std::move(transform), autocast, config.precision.channels_last,
                     device, dataset.size());
}

std::vector<torch::Tensor> ModelRunner::Fields(const Batch& batch, std::span<const int64_t> indices,
                                               int64_t first, int64_t last, int64_t position,
                                               bool augment) const {
  std::vector<torch::Tensor> fields;
  for (const torch::Tensor& field : batch.fields) fields.push_back(field.slice(0, first, last));
  if (transform_) {
    torch::Tensor& input = fields[*roles_.input];
    input = transform_->Apply(input, indices, position, dataset_size_, augment);
    if (channels_last_ && input.dim() == 4)
      input = input.contiguous(at::MemoryFormat::ChannelsLast);
  }
  return fields;
}

torch::Tensor ModelRunner::Loss(const c10::IValue& outputs,
                                const std::vector<torch::Tensor>& fields) const {
  if (model_->HasLoss()) {
    torch::Tensor loss = model_->Loss(outputs, fields);
    TORCH_CHECK(loss.dim() == 0, "the module's loss method returned a tensor of shape ",
                loss.sizes(), ", not one number (the sum over the batch)");
    return loss;
  }
  TORCH_CHECK(outputs.isTensor(), "forward returned a ", outputs.tagKind(),
              ": the default loss needs class logits [batch, classes] (or give the module a "
              "loss method)");
  return torch::nn::functional::cross_entropy(
      outputs.toTensor(), fields[*roles_.label].to(torch::kInt64),
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

torch::Tensor ModelRunner::ForwardLoss(const std::vector<torch::Tensor>& fields) const {
  // Backward runs outside autocast, as in PyTorch.
  AutocastGuard autocast(device_.type(), autocast_);
  return Loss(model_->Forward(fields), fields).to(torch::kFloat32);
}

Batch ModelRunner::OnDevice(Dataset& dataset, std::span<const int64_t> indices) const {
  Batch batch = dataset.Get(indices);
  for (torch::Tensor& field : batch.fields) field = field.to(device_);
  return batch;
}

Status ModelRunner::Probe(Dataset& dataset) const {
  const int64_t samples = std::min<int64_t>(dataset.size(), 8);
  if (samples < 1) return Ok();
  std::vector<int64_t> indices(static_cast<std::size_t>(samples));
  std::iota(indices.begin(), indices.end(), int64_t{0});
  const Batch batch = OnDevice(dataset, indices);
  // In eval mode (no dropout, BatchNorm on its running statistics) a sample's loss does not
  // depend on the others, so a sum is additive over any split of the batch; in float32, so
  // rounding does not blur it.
  model_->SetTraining(false);
  torch::NoGradGuard no_grad;
  auto loss_of = [&](int64_t first, int64_t last) {
    const std::vector<torch::Tensor> fields =
        Fields(batch,
               std::span<const int64_t>(indices).subspan(static_cast<std::size_t>(first),
                                                         static_cast<std::size_t>(last - first)),
               first, last, first);
    return Loss(model_->Forward(fields), fields).item<double>();
  };
  double whole = 0.0, front = 0.0, back = 0.0;
  const int64_t half = samples / 2;
  try {
    whole = loss_of(0, samples);
    if (half > 0) front = loss_of(0, half), back = loss_of(half, samples);
  } catch (const std::exception& error) {
    model_->SetTraining(true);
    return InvalidArgument("--torchscript", "the module fails on the dataset's first " +
                                                std::to_string(samples) +
                                                " samples: " + ShortError(error));
  }
  model_->SetTraining(true);
  if (!model_->HasLoss() || half == 0) return Ok();
  const double sum = front + back;
  const double mean =
      (front * static_cast<double>(half) + back * static_cast<double>(samples - half)) /
      static_cast<double>(samples);
  const double tolerance = 1e-3 * std::max(std::abs(whole), std::abs(sum)) + 1e-6;
  const std::string measured = "loss of samples 0-" + std::to_string(samples - 1) + " = " +
                               std::to_string(whole) + ", of their halves " +
                               std::to_string(front) + " and " + std::to_string(back);
  if (std::abs(whole - sum) <= tolerance) return Ok();
  if (std::abs(whole - mean) <= tolerance) {
    return InvalidArgument(
        "--torchscript",
        "the module's loss method returns the mean over the batch (" + measured +
            "): return the sum (reduction='sum'). Workers train unequal batches; the trainer "
            "adds their sums and divides by the global batch, which a mean would weight wrongly");
  }
  return InvalidArgument("--torchscript",
                         "the module's loss method is not a sum over the samples (" + measured +
                             "): return the sum of per-sample losses; put regularisation in "
                             "--weight-decay");
}

EvaluationSums ModelRunner::Evaluate(Dataset& dataset, int64_t first, int64_t last,
                                     int batch_size) const {
  EvaluationSums sums;
  sums.samples = last - first;
  const std::vector<DataField>& fields_of = dataset.fields();
  sums.accuracy = roles_.label.has_value() &&
                  c10::isIntegralType(fields_of[*roles_.label].type, /*includeBool=*/false) &&
                  fields_of[*roles_.label].shape.empty();
  model_->SetTraining(false);
  torch::NoGradGuard no_grad;
  for (int64_t begin = first; begin < last; begin += batch_size) {
    const int64_t end = std::min(last, begin + batch_size);
    std::vector<int64_t> indices(static_cast<std::size_t>(end - begin));
    std::iota(indices.begin(), indices.end(), begin);
    const Batch batch = OnDevice(dataset, indices);
    const std::vector<torch::Tensor> fields =
        Fields(batch, indices, 0, end - begin, begin, /*augment=*/false);
    AutocastGuard autocast(device_.type(), autocast_);
    const c10::IValue outputs = model_->Forward(fields);
    sums.loss += Loss(outputs, fields).to(torch::kFloat32).item<double>();
    // Top-1 where forward returns one row of class scores per sample.
    sums.accuracy = sums.accuracy && outputs.isTensor() && outputs.toTensor().dim() == 2;
    if (sums.accuracy) {
      sums.correct += outputs.toTensor()
                          .argmax(1)
                          .eq(fields[*roles_.label].to(torch::kInt64))
                          .sum()
                          .item<double>();
    }
  }
  model_->SetTraining(true);
  return sums;
}

}  // namespace fulcrum::trainer
