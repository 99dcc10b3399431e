#include "trainer_image/trainer/model/model.h"

#include "trainer_image/trainer/model/builtin_models.h"
#include "trainer_image/trainer/model/scripted_model.h"

namespace fulcrum::trainer {

torch::Tensor TrainingModel::Loss(const c10::IValue&, const std::vector<torch::Tensor>&) {
  throw std::logic_error("TrainingModel::Loss called on a model without a loss method");
}

Result<std::unique_ptr<TrainingModel>> MakeModel(const ModelOptions& options) {
  if (options.kind == ModelKind::kTorchScript) return LoadScriptedModel(options.torchscript);
  return MakeBuiltinModel(options);
}

}  // namespace fulcrum::trainer
