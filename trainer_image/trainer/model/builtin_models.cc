#include "trainer_image/trainer/model/builtin_models.h"

namespace fulcrum::trainer {
namespace {

namespace nn = torch::nn;

// Linear -> ReLU -> Linear -> ReLU -> Linear; no BatchNorm, so weighted data parallelism
// equals single-process training exactly (up to float rounding). Samples of any shape are
// flattened (an image [C, H, W] of a packed dataset is C*H*W inputs).
struct MlpImpl : nn::Module {
  MlpImpl(int inputs, int hidden, int classes)
      : first(register_module("first", nn::Linear(inputs, hidden))),
        second(register_module("second", nn::Linear(hidden, hidden))),
        out(register_module("out", nn::Linear(hidden, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    return out(torch::relu(second(torch::relu(first(x.flatten(1))))));
  }
  nn::Linear first, second, out;
};
TORCH_MODULE(Mlp);

struct ResidualBlockImpl : nn::Module {
  explicit ResidualBlockImpl(int channels)
      : conv1(register_module(
            "conv1", nn::Conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(channels))),
        conv2(register_module(
            "conv2", nn::Conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(channels))) {}
  torch::Tensor forward(torch::Tensor x) {
    return torch::relu(x + bn2(conv2(torch::relu(bn1(conv1(x))))));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
};
TORCH_MODULE(ResidualBlock);

// Stem, two residual blocks, global average pooling, linear head: a ResNet in miniature.
struct SmallResNetImpl : nn::Module {
  SmallResNetImpl(int channels, int classes)
      : stem(register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, channels, 3).padding(1)))),
        block1(register_module("block1", ResidualBlock(channels))),
        block2(register_module("block2", ResidualBlock(channels))),
        head(register_module("head", nn::Linear(channels, classes))) {}
  torch::Tensor forward(torch::Tensor x) {
    x = block2(block1(torch::relu(stem(x))));
    return head(x.mean({2, 3}));
  }
  nn::Conv2d stem;
  ResidualBlock block1, block2;
  nn::Linear head;
};
TORCH_MODULE(SmallResNet);

// ResNet-18 (He et al. 2016): four stages of two basic blocks, 64 to 512 channels, 11.2M
// parameters at 10 classes. The ImageNet stem (7x7 stride 2, max-pool) for inputs of 64 pixels
// and more, the CIFAR stem (3x3 stride 1) below. The realistic model for measuring c(b).
struct BasicBlockImpl : nn::Module {
  BasicBlockImpl(int in, int out, int stride)
      : conv1(register_module(
            "conv1",
            nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)))),
        bn1(register_module("bn1", nn::BatchNorm2d(out))),
        conv2(register_module("conv2",
                              nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)))),
        bn2(register_module("bn2", nn::BatchNorm2d(out))) {
    if (stride != 1 || in != out) {
      shortcut = register_module(
          "shortcut",
          nn::Sequential(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                         nn::BatchNorm2d(out)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    torch::Tensor out = bn2(conv2(torch::relu(bn1(conv1(x)))));
    return torch::relu(out + (shortcut ? shortcut->forward(x) : x));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential shortcut{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : nn::Module {
  ResNet18Impl(int image_size, int classes) : imagenet_stem(image_size >= 64) {
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 64, imagenet_stem ? 7 : 3)
                                                  .stride(imagenet_stem ? 2 : 1)
                                                  .padding(imagenet_stem ? 3 : 1)
                                                  .bias(false)));
    stem_bn = register_module("stem_bn", nn::BatchNorm2d(64));
    int in = 64;
    for (int stage = 0; stage < 4; ++stage) {
      const int out = 64 << stage;
      for (int block = 0; block < 2; ++block) {
        const int stride = stage > 0 && block == 0 ? 2 : 1;
        blocks->push_back(BasicBlock(in, out, stride));
        in = out;
      }
    }
    register_module("blocks", blocks);
    head = register_module("head", nn::Linear(512, classes));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(stem_bn(stem(x)));
    if (imagenet_stem) x = torch::max_pool2d(x, 3, 2, 1);
    x = blocks->forward(x);
    return head(x.mean({2, 3}));
  }
  bool imagenet_stem;
  nn::Conv2d stem{nullptr};
  nn::BatchNorm2d stem_bn{nullptr};
  nn::Sequential blocks;
  nn::Linear head{nullptr};
};
TORCH_MODULE(ResNet18);

template <typename Holder>
class BuiltinModel final : public TrainingModel {
 public:
  explicit BuiltinModel(Holder module) : module_(std::move(module)) { module_->train(); }
  std::vector<NamedTensor> NamedParameters() override { return Named(module_->named_parameters()); }
  std::vector<NamedTensor> NamedBuffers() override { return Named(module_->named_buffers()); }
  Status Bind(const std::vector<DataField>& fields, const FieldRoles& roles) override {
    if (!roles.input) {
      return InvalidArgument("--input-field",
                             "is required: the dataset has " + std::to_string(fields.size()) +
                                 " fields (" + FieldNames(fields) + "), so name the model's input");
    }
    input_ = *roles.input;
    return Ok();
  }
  c10::IValue Forward(const std::vector<torch::Tensor>& batch) override {
    return module_->forward(batch[input_]);
  }
  void To(const torch::Device& device) override { module_->to(device); }
  void SetTraining(bool training) override { module_->train(training); }
  Status Save(const std::string& path) override {
    try {
      torch::save(module_, path);
      return Ok();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, "cannot write " + path + ": " + error.what());
    }
  }

 private:
  static std::vector<NamedTensor> Named(const torch::OrderedDict<std::string, torch::Tensor>& all) {
    std::vector<NamedTensor> named;
    for (const auto& item : all) named.push_back({item.key(), item.value()});
    return named;
  }
  Holder module_;
  std::size_t input_ = 0;
};

}  // namespace

Result<std::unique_ptr<TrainingModel>> MakeBuiltinModel(const ModelOptions& options) {
  torch::manual_seed(options.seed);
  switch (options.kind) {
    case ModelKind::kMlp:
      return std::unique_ptr<TrainingModel>(std::make_unique<BuiltinModel<Mlp>>(
          Mlp(options.input_features, options.hidden, options.classes)));
    case ModelKind::kCnn:
      return std::unique_ptr<TrainingModel>(std::make_unique<BuiltinModel<SmallResNet>>(
          SmallResNet(options.hidden, options.classes)));
    case ModelKind::kResNet18:
      return std::unique_ptr<TrainingModel>(
          std::make_unique<BuiltinModel<ResNet18>>(ResNet18(options.image_size, options.classes)));
    case ModelKind::kTorchScript:
      break;
  }
  return InvalidArgument("--model", "unknown model");
}

}  // namespace fulcrum::trainer
