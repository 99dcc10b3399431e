// Which of a dataset's fields play which part: the input that built-in models and one-argument
// forwards take (and the device transforms prepare), and the class label of the default loss.
// A model that names its fields (model.h) takes them by name instead; these roles still say
// which field is transformed and which one forward is not given unless it asks.
#pragma once

#include <cstddef>
#include <optional>

#include "common/result.h"
#include "trainer_image/trainer/data/dataset.h"
#include "trainer_image/trainer/data/dataset_options.h"

namespace fulcrum::trainer {

struct FieldRoles {
  std::optional<std::size_t> input;  // --input-field, else the one field besides the label
  std::optional<std::size_t> label;  // --label-field (default "label") where the dataset has it
};

// Errors name the flag: an --input-field the dataset lacks.
Result<FieldRoles> AssignFieldRoles(const Dataset& dataset, const DatasetOptions& options);

// The default loss (cross-entropy) needs one integer class per sample: errors name
// --label-field and say how to give the model its own loss instead.
Status CheckClassLabel(const Dataset& dataset, const FieldRoles& roles,
                       const DatasetOptions& options);

}  // namespace fulcrum::trainer
