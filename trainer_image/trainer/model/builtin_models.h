// The built-in networks: an MLP, a small ResNet-like CNN and ResNet-18. Each takes the input
// field and returns class logits.
#pragma once

#include <memory>

#include "common/result.h"
#include "trainer_image/trainer/model/model.h"

namespace fulcrum::trainer {

Result<std::unique_ptr<TrainingModel>> MakeBuiltinModel(const ModelOptions& options);

}  // namespace fulcrum::trainer
