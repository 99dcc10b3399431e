#include "trainer_image/trainer/dataset.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

#include "trainer_image/trainer/record_file.h"
#include "trainer_image/trainer/sample_order.h"

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

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(int64_t size, std::vector<int64_t> shape, int classes, uint64_t seed)
      : size_(size), shape_(std::move(shape)), classes_(classes), seed_(seed) {
    features_ = 1;
    for (int64_t dimension : shape_) features_ *= dimension;
    teacher_.resize(static_cast<std::size_t>(classes_ * features_));
    FillNormal(seed_ ^ 0x7EAC4E57ULL, teacher_);
  }
  int64_t size() const override { return size_; }
  Batch Get(std::span<const int64_t> indices) override {
    const auto count = static_cast<int64_t>(indices.size());
    torch::Tensor inputs = torch::empty({count, features_}, torch::kFloat32);
    torch::Tensor targets = torch::empty({count}, torch::kInt64);
    float* data = inputs.data_ptr<float>();
    int64_t* labels = targets.data_ptr<int64_t>();
    for (int64_t row = 0; row < count; ++row) {
      std::span<float> x(data + row * features_, static_cast<std::size_t>(features_));
      FillNormal(seed_ * 0x9E3779B97F4A7C15ULL +
                     static_cast<uint64_t>(indices[static_cast<std::size_t>(row)]),
                 x);
      int best = 0;
      double best_score = -1e300;
      for (int c = 0; c < classes_; ++c) {
        double score = 0.0;
        for (int64_t j = 0; j < features_; ++j)
          score += teacher_[static_cast<std::size_t>(c * features_ + j)] *
                   x[static_cast<std::size_t>(j)];
        if (score > best_score) best_score = score, best = c;
      }
      labels[row] = best;
    }
    std::vector<int64_t> shape = {count};
    shape.insert(shape.end(), shape_.begin(), shape_.end());
    return {inputs.view(shape), targets};
  }

 private:
  int64_t size_;
  std::vector<int64_t> shape_;
  int classes_;
  uint64_t seed_;
  int64_t features_ = 0;
  std::vector<float> teacher_;
};

class RecordFileDataset final : public Dataset {
 public:
  explicit RecordFileDataset(RecordFile file) : file_(std::move(file)) {}
  int64_t size() const override { return file_.size(); }
  Batch Get(std::span<const int64_t> indices) override {
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
  RecordFile file_;
};

}  // namespace

Result<std::unique_ptr<Dataset>> MakeDataset(const TrainerFlags& flags) {
  switch (flags.model) {
    case ModelKind::kMlp:
      return std::unique_ptr<Dataset>(std::make_unique<SyntheticDataset>(
          flags.dataset_size, std::vector<int64_t>{flags.input_features}, flags.classes,
          flags.seed));
    case ModelKind::kCnn:
    case ModelKind::kResNet18:
      return std::unique_ptr<Dataset>(std::make_unique<SyntheticDataset>(
          flags.dataset_size, std::vector<int64_t>{3, flags.image_size, flags.image_size},
          flags.classes, flags.seed));
    case ModelKind::kTorchScript: {
      // The module's output width bounds the labels, and --classes does not apply to it: only
      // negative labels are refused here; torch refuses labels past the output.
      Result<RecordFile> file = RecordFile::Open(flags.data_file, flags.record_features,
                                                 std::numeric_limits<int32_t>::max());
      if (!file.ok()) return file.error();
      return std::unique_ptr<Dataset>(std::make_unique<RecordFileDataset>(std::move(file).value()));
    }
  }
  return InvalidArgument("--model", "unknown model");
}

}  // namespace fulcrum::trainer
