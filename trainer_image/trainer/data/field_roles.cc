#include "trainer_image/trainer/data/field_roles.h"

namespace fulcrum::trainer {

Result<FieldRoles> AssignFieldRoles(const Dataset& dataset, const DatasetOptions& options) {
  FieldRoles roles;
  roles.label = dataset.FieldIndex(options.label_field);
  if (!options.input_field.empty()) {
    roles.input = dataset.FieldIndex(options.input_field);
    if (!roles.input) {
      return InvalidArgument("--input-field", "\"" + options.input_field +
                                                  "\" is not a field of the dataset (its fields: " +
                                                  dataset.FieldNames() + ")");
    }
    return roles;
  }
  const std::size_t fields = dataset.fields().size();
  const std::size_t others = fields - (roles.label ? 1 : 0);
  if (others == 1) {
    for (std::size_t i = 0; i < fields; ++i) {
      if (i != roles.label) roles.input = i;
    }
  }
  return roles;
}

Status CheckClassLabel(const Dataset& dataset, const FieldRoles& roles,
                       const DatasetOptions& options) {
  if (!roles.label) {
    return InvalidArgument(
        "--label-field",
        "\"" + options.label_field +
            "\" is not a field of the dataset (its fields: " + dataset.FieldNames() +
            "): name the class label for the default cross-entropy loss, or "
            "give the model a loss method (docs/user-guide.md, model contract)");
  }
  const DataField& label = dataset.fields()[*roles.label];
  if (!c10::isIntegralType(label.type, /*includeBool=*/false) || !label.shape.empty()) {
    return InvalidArgument("--label-field",
                           "field " + label.name +
                               " must hold one integer class per sample (shape []) for the "
                               "default cross-entropy loss; for another target give the model a "
                               "loss method (docs/user-guide.md, model contract)");
  }
  return Ok();
}

}  // namespace fulcrum::trainer
