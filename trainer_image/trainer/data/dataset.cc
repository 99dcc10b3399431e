#include "trainer_image/trainer/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numbers>
#include <stdexcept>
#include <thread>

#include "trainer_image/trainer/data/packed_dataset.h"
#include "trainer_image/trainer/data/record_file.h"
#include "trainer_image/trainer/data/sample_order.h"

namespace fulcrum::trainer {
namespace {

// Standard normal values from a SplitMix64 stream (Box-Muller), portable across platforms.
void FillNormal(uint64_t state, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); i += 2) {
    const double u1 = (static_cast<double>(SplitMix64(state) >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    const double radius = std::sqrt(-2.0 * std::log(u1));
    out[i] = static_cast<float>(radius * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < out.size())
      out[i + 1] = static_cast<float>(radius * std::sin(2.0 * std::numbers::pi * u2));
  }
}

// Generated once: samples are made at construction and then only copied, so a step (on a GPU
// above all) measures training, not the generator. Datasets larger than kPoolBytes keep a pool
// of that size and repeat it: sample i is pool sample i mod P.
class SyntheticDataset final : public Dataset {
 public:
  static constexpr int64_t kPoolBytes = int64_t{256} << 20;

  SyntheticDataset(int64_t size, std::vector<int64_t> shape, int classes, uint64_t seed)
      : size_(size), shape_(std::move(shape)) {
    int64_t features = 1;
    for (int64_t dimension : shape_) features *= dimension;
    const int64_t pool = std::clamp<int64_t>(kPoolBytes / (features * 4), 1, size_);
    std::vector<float> teacher(static_cast<std::size_t>(classes * features));
    FillNormal(seed ^ 0x7EAC4E57ULL, teacher);
    inputs_ = torch::empty({pool, features}, torch::kFloat32);
    targets_ = torch::empty({pool}, torch::kInt64);
    float* data = inputs_.data_ptr<float>();
    int64_t* labels = targets_.data_ptr<int64_t>();
    for (int64_t row = 0; row < pool; ++row) {
      std::span<float> x(data + row * features, static_cast<std::size_t>(features));
      FillNormal(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(row), x);
      int best = 0;
      double best_score = -1e300;
      for (int c = 0; c < classes; ++c) {
        double score = 0.0;
        for (int64_t j = 0; j < features; ++j)
          score +=
              teacher[static_cast<std::size_t>(c * features + j)] * x[static_cast<std::size_t>(j)];
        if (score > best_score) best_score = score, best = c;
      }
      labels[row] = best;
    }
    std::vector<int64_t> pooled = {pool};
    pooled.insert(pooled.end(), shape_.begin(), shape_.end());
    inputs_ = inputs_.view(pooled);
  }
  int64_t size() const override { return size_; }
  std::vector<int64_t> sample_shape() const override { return shape_; }
  torch::ScalarType input_type() const override { return torch::kFloat32; }
  Batch Get(std::span<const int64_t> indices) override {
    torch::Tensor rows =
        torch::tensor(std::vector<int64_t>(indices.begin(), indices.end()), torch::kInt64)
            .remainder(inputs_.size(0));
    return {inputs_.index_select(0, rows), targets_.index_select(0, rows)};
  }

 private:
  int64_t size_;
  std::vector<int64_t> shape_;
  torch::Tensor inputs_;   // [pool, shape...]
  torch::Tensor targets_;  // [pool]
};

class RecordFileDataset final : public Dataset {
 public:
  explicit RecordFileDataset(RecordFile file) : file_(std::move(file)) {}
  int64_t size() const override { return file_.size(); }
  std::vector<int64_t> sample_shape() const override { return {file_.features()}; }
  torch::ScalarType input_type() const override { return torch::kFloat32; }
  Batch Get(std::span<const int64_t> indices) override {
    // RecordFile reads through one stream; the loader's threads take turns.
    std::lock_guard lock(mutex_);
    const auto count = static_cast<int64_t>(indices.size());
    const int features = file_.features();
    torch::Tensor inputs = torch::empty({count, features}, torch::kFloat32);
    torch::Tensor targets = torch::empty({count}, torch::kInt64);
    for (int64_t row = 0; row < count; ++row) {
      std::span<float> x(inputs.data_ptr<float>() + row * features,
                         static_cast<std::size_t>(features));
      Result<int32_t> label = file_.Read(indices[static_cast<std::size_t>(row)], x);
      // Get has no error path: a bad record fails the step as torch errors do, but says why.
      if (!label.ok()) throw std::runtime_error(label.error().ToString());
      targets.data_ptr<int64_t>()[row] = *label;
    }
    return {inputs, targets};
  }

 private:
  std::mutex mutex_;
  RecordFile file_;
};

torch::ScalarType TorchTypeOf(ElementType type) {
  switch (type) {
    case ElementType::kUint8:
      return torch::kUInt8;
    case ElementType::kInt8:
      return torch::kInt8;
    case ElementType::kInt16:
      return torch::kInt16;
    case ElementType::kInt32:
      return torch::kInt32;
    case ElementType::kInt64:
      return torch::kInt64;
    case ElementType::kFloat16:
      return torch::kFloat16;
    case ElementType::kBFloat16:
      return torch::kBFloat16;
    case ElementType::kFloat32:
      return torch::kFloat32;
  }
  return torch::kFloat32;
}

class PackedTensorDataset final : public Dataset {
 public:
  PackedTensorDataset(PackedDataset dataset, std::size_t input, std::size_t label)
      : dataset_(std::move(dataset)), input_(input), label_(label) {}
  int64_t size() const override { return dataset_.size(); }
  std::vector<int64_t> sample_shape() const override { return dataset_.fields()[input_].shape; }
  std::optional<int64_t> classes() const override { return dataset_.fields()[label_].classes; }
  torch::ScalarType input_type() const override {
    return TorchTypeOf(dataset_.fields()[input_].type);
  }
  Batch Get(std::span<const int64_t> indices) override {
    torch::Tensor targets = Gather(label_, indices);
    return {Gather(input_, indices), targets.to(torch::kInt64)};
  }

 private:
  torch::Tensor Gather(std::size_t field, std::span<const int64_t> indices) const {
    const FieldSpec& spec = dataset_.fields()[field];
    std::vector<int64_t> shape = {static_cast<int64_t>(indices.size())};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    torch::Tensor out = torch::empty(shape, torch::TensorOptions(TorchTypeOf(spec.type)));
    dataset_.Gather(field, indices,
                    std::span(static_cast<std::byte*>(out.data_ptr()), out.nbytes()));
    return out;
  }

  PackedDataset dataset_;
  std::size_t input_;
  std::size_t label_;
};

Result<std::unique_ptr<Dataset>> OpenPacked(const DatasetOptions& options) {
  Result<PackedDataset> dataset = PackedDataset::Open(options.packed_dir);
  if (!dataset.ok()) return dataset.error();
  Result<std::size_t> label = dataset->FieldIndex(options.label_field);
  if (!label.ok()) {
    return InvalidArgument("--label-field",
                           "\"" + options.label_field + "\" " + label.error().message);
  }
  const FieldSpec& label_spec = dataset->fields()[*label];
  if (!IsInteger(label_spec.type) || !label_spec.shape.empty()) {
    return InvalidArgument("--label-field", "field " + label_spec.name +
                                                " must hold one integer class per sample (shape "
                                                "[]) for the cross-entropy loss");
  }
  std::size_t input = 0;
  if (!options.input_field.empty()) {
    Result<std::size_t> named = dataset->FieldIndex(options.input_field);
    if (!named.ok()) {
      return InvalidArgument("--input-field",
                             "\"" + options.input_field + "\" " + named.error().message);
    }
    input = *named;
  } else if (dataset->fields().size() == 2) {
    input = 1 - *label;
  } else {
    return InvalidArgument("--input-field", "is required: the dataset has " +
                                                std::to_string(dataset->fields().size()) +
                                                " fields, so name the model's input");
  }
  return std::unique_ptr<Dataset>(
      std::make_unique<PackedTensorDataset>(std::move(*dataset), input, *label));
}

// EMULATION (tests and benchmarks only): storage slower by a fixed delay per sample read, to
// show that a data-bound worker is reported as such and not rebalanced as a slow GPU.
class EmulatedSlowStorage final : public Dataset {
 public:
  EmulatedSlowStorage(std::unique_ptr<Dataset> inner, std::chrono::microseconds per_sample)
      : inner_(std::move(inner)), per_sample_(per_sample) {}
  int64_t size() const override { return inner_->size(); }
  std::vector<int64_t> sample_shape() const override { return inner_->sample_shape(); }
  torch::ScalarType input_type() const override { return inner_->input_type(); }
  std::optional<int64_t> classes() const override { return inner_->classes(); }
  Batch Get(std::span<const int64_t> indices) override {
    std::this_thread::sleep_for(per_sample_ * static_cast<int64_t>(indices.size()));
    return inner_->Get(indices);
  }

 private:
  std::unique_ptr<Dataset> inner_;
  std::chrono::microseconds per_sample_;
};

Result<std::unique_ptr<Dataset>> OpenDataset(const DatasetOptions& options);

}  // namespace

Result<std::unique_ptr<Dataset>> MakeDataset(const DatasetOptions& options) {
  Result<std::unique_ptr<Dataset>> dataset = OpenDataset(options);
  if (!dataset.ok() || options.emulated_read_microseconds_per_sample == 0) return dataset;
  return std::unique_ptr<Dataset>(std::make_unique<EmulatedSlowStorage>(
      std::move(*dataset),
      std::chrono::microseconds(options.emulated_read_microseconds_per_sample)));
}

namespace {

Result<std::unique_ptr<Dataset>> OpenDataset(const DatasetOptions& options) {
  if (!options.packed_dir.empty()) return OpenPacked(options);
  if (!options.record_file.empty()) {
    Result<RecordFile> file = RecordFile::Open(options.record_file, options.record_features,
                                               std::numeric_limits<int32_t>::max());
    if (!file.ok()) return file.error();
    return std::unique_ptr<Dataset>(std::make_unique<RecordFileDataset>(std::move(file).value()));
  }
  if (options.synthetic_shape.empty())
    return InvalidArgument("dataset", "a synthetic dataset needs a sample shape");
  return std::unique_ptr<Dataset>(std::make_unique<SyntheticDataset>(
      options.synthetic_size, options.synthetic_shape, options.classes, options.seed));
}

}  // namespace

}  // namespace fulcrum::trainer
