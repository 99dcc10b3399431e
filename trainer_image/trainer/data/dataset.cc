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

  SyntheticDataset(int64_t size, const std::vector<int64_t>& shape, int classes, uint64_t seed)
      : size_(size),
        fields_{{.name = "input", .shape = shape, .type = torch::kFloat32, .classes = {}},
                {.name = "label", .shape = {}, .type = torch::kInt64, .classes = classes}} {
    int64_t features = 1;
    for (int64_t dimension : shape) features *= dimension;
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
    pooled.insert(pooled.end(), shape.begin(), shape.end());
    inputs_ = inputs_.view(pooled);
  }
  int64_t size() const override { return size_; }
  const std::vector<DataField>& fields() const override { return fields_; }
  Batch Get(std::span<const int64_t> indices) override {
    torch::Tensor rows =
        torch::tensor(std::vector<int64_t>(indices.begin(), indices.end()), torch::kInt64)
            .remainder(inputs_.size(0));
    return {{inputs_.index_select(0, rows), targets_.index_select(0, rows)}};
  }

 private:
  int64_t size_;
  std::vector<DataField> fields_;
  torch::Tensor inputs_;   // [pool, shape...]
  torch::Tensor targets_;  // [pool]
};

class RecordFileDataset final : public Dataset {
 public:
  explicit RecordFileDataset(RecordFile file)
      : file_(std::move(file)),
        fields_{
            {.name = "input", .shape = {file_.features()}, .type = torch::kFloat32, .classes = {}},
            {.name = "label", .shape = {}, .type = torch::kInt64, .classes = {}}} {}
  int64_t size() const override { return file_.size(); }
  const std::vector<DataField>& fields() const override { return fields_; }
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
    return {{inputs, targets}};
  }

 private:
  std::mutex mutex_;
  RecordFile file_;
  std::vector<DataField> fields_;
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

// Every field of the packed dataset, as stored: which ones the model takes is the trainer's
// business (field_roles.h).
class PackedTensorDataset final : public Dataset {
 public:
  explicit PackedTensorDataset(PackedDataset dataset) : dataset_(std::move(dataset)) {
    for (const FieldSpec& spec : dataset_.fields()) {
      fields_.push_back({.name = spec.name,
                         .shape = spec.shape,
                         .type = TorchTypeOf(spec.type),
                         .classes = spec.classes});
    }
  }
  int64_t size() const override { return dataset_.size(); }
  const std::vector<DataField>& fields() const override { return fields_; }
  Batch Get(std::span<const int64_t> indices) override {
    Batch batch;
    for (std::size_t field = 0; field < fields_.size(); ++field)
      batch.fields.push_back(Gather(field, indices));
    return batch;
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
  std::vector<DataField> fields_;
};

Result<std::unique_ptr<Dataset>> OpenPacked(const DatasetOptions& options) {
  Result<PackedDataset> dataset = PackedDataset::Open(options.packed_dir);
  if (!dataset.ok()) return dataset.error();
  return std::unique_ptr<Dataset>(std::make_unique<PackedTensorDataset>(std::move(*dataset)));
}

// EMULATION (tests and benchmarks only): storage slower by a fixed delay per sample read, to
// show that a data-bound worker is reported as such and not rebalanced as a slow GPU.
class EmulatedSlowStorage final : public Dataset {
 public:
  EmulatedSlowStorage(std::unique_ptr<Dataset> inner, std::chrono::microseconds per_sample)
      : inner_(std::move(inner)), per_sample_(per_sample) {}
  int64_t size() const override { return inner_->size(); }
  const std::vector<DataField>& fields() const override { return inner_->fields(); }
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

std::optional<std::size_t> Dataset::FieldIndex(std::string_view name) const {
  const std::vector<DataField>& all = fields();
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (all[i].name == name) return i;
  }
  return std::nullopt;
}

std::string FieldNames(const std::vector<DataField>& fields) {
  std::string names;
  for (const DataField& field : fields) names += (names.empty() ? "" : ", ") + field.name;
  return names;
}

std::string Dataset::FieldNames() const {
  return trainer::FieldNames(fields());
}

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
