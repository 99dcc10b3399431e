// A user's TorchScript module under the model contract (docs/user-guide.md):
// - forward names the dataset fields it takes, by argument name (forward(self, input_ids,
//   attention_mask)) or as one Dict[str, Tensor] (every field but the label); a forward of one
//   argument not named after a field takes the input field (--input-field);
// - an optional method loss(self, outputs, batch: Dict[str, Tensor]) -> Tensor returns the sum
//   over the batch's samples (the batch holds every field, the label too);
// - parameters with requires_grad=False stay frozen.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "trainer_image/trainer/model/model.h"

namespace fulcrum::trainer {

// Errors name --torchscript and the file.
Result<std::unique_ptr<TrainingModel>> LoadScriptedModel(const std::string& path);

}  // namespace fulcrum::trainer
