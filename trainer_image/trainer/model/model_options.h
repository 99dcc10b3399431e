// Which model fulcrum-trainer trains and how it is built. Torch-free, so the command line and
// the operator's tests can fill it without libtorch.
#pragma once

#include <cstdint>
#include <string>

namespace fulcrum::trainer {

enum class ModelKind { kMlp, kCnn, kResNet18, kTorchScript };

struct ModelOptions {
  ModelKind kind = ModelKind::kMlp;
  std::string torchscript;  // kTorchScript: the module file (forward(x) -> logits)
  int input_features = 32;  // MLP input width
  int hidden = 64;          // MLP hidden width, CNN channels
  int image_size = 8;       // CNN and ResNet-18 input is 3 x image_size x image_size
  int classes = 10;
  uint64_t seed = 1;
};

}  // namespace fulcrum::trainer
