#include "trainer_image/trainer/model/scripted_model.h"

#include <torch/script.h>

#include <optional>
#include <utility>

namespace fulcrum::trainer {
namespace {

bool IsTensorDict(const c10::TypePtr& type) {
  const auto dict = type->cast<c10::DictType>();
  return dict && dict->getKeyType()->kind() == c10::TypeKind::StringType &&
         dict->getValueType()->kind() == c10::TypeKind::TensorType;
}

class ScriptedModel final : public TrainingModel {
 public:
  explicit ScriptedModel(torch::jit::Module module) : module_(std::move(module)) {
    module_.train();
  }

  std::vector<NamedTensor> NamedParameters() override {
    std::vector<NamedTensor> named;
    for (const auto& item : module_.named_parameters()) named.push_back({item.name, item.value});
    return named;
  }
  std::vector<NamedTensor> NamedBuffers() override {
    std::vector<NamedTensor> named;
    for (const auto& item : module_.named_buffers()) named.push_back({item.name, item.value});
    return named;
  }

  Status Bind(const std::vector<DataField>& fields, const FieldRoles& roles) override {
    field_names_.clear();
    for (const DataField& field : fields) field_names_.push_back(field.name);
    auto index_of = [&](const std::string& name) -> std::optional<std::size_t> {
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (fields[i].name == name) return i;
      }
      return std::nullopt;
    };
    const std::vector<c10::Argument>& arguments =
        module_.get_method("forward").function().getSchema().arguments();  // [0] is self
    forward_arguments_.clear();
    dict_fields_.clear();
    if (arguments.size() == 2 && IsTensorDict(arguments[1].type())) {
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (i != roles.label) dict_fields_.push_back(i);
      }
    } else {
      for (std::size_t a = 1; a < arguments.size(); ++a) {
        const c10::Argument& argument = arguments[a];
        if (IsTensorDict(argument.type())) {
          return InvalidArgument("--torchscript", "forward's argument \"" + argument.name() +
                                                      "\" is a Dict[str, Tensor]: such an "
                                                      "argument must be forward's only one");
        }
        if (std::optional<std::size_t> field = index_of(argument.name())) {
          forward_arguments_.emplace_back(argument.name(), *field);
        } else if (arguments.size() == 2 && roles.input) {
          forward_arguments_.emplace_back(argument.name(), *roles.input);  // forward(self, x)
        } else if (!argument.default_value()) {
          return InvalidArgument(
              "--torchscript",
              "forward asks for \"" + argument.name() +
                  "\", which is not a field of the dataset (its fields: " + FieldNames(fields) +
                  (arguments.size() == 2
                       ? "): name the argument after a field, or say which field it is with "
                         "--input-field"
                       : "): name forward's arguments after the dataset's fields"));
        }
      }
    }
    loss_.reset();
    if (c10::optional<torch::jit::Method> loss = module_.find_method("loss")) loss_ = *loss;
    if (loss_) {
      const std::vector<c10::Argument>& loss_arguments = loss_->function().getSchema().arguments();
      if (loss_arguments.size() != 3 || !IsTensorDict(loss_arguments[2].type())) {
        return InvalidArgument("--torchscript",
                               "the module's loss method must be "
                               "loss(self, outputs, batch: Dict[str, Tensor]) -> Tensor");
      }
    }
    return Ok();
  }

  c10::IValue Forward(const std::vector<torch::Tensor>& batch) override {
    if (!dict_fields_.empty()) {
      c10::Dict<std::string, at::Tensor> fields;
      for (std::size_t i : dict_fields_) fields.insert(field_names_[i], batch[i]);
      return module_.forward({fields});
    }
    torch::jit::Kwargs arguments;
    for (const auto& [name, field] : forward_arguments_) arguments.emplace(name, batch[field]);
    return module_.get_method("forward")({}, arguments);
  }

  bool HasLoss() const override { return loss_.has_value(); }
  torch::Tensor Loss(const c10::IValue& outputs, const std::vector<torch::Tensor>& batch) override {
    c10::Dict<std::string, at::Tensor> fields;
    for (std::size_t i = 0; i < batch.size(); ++i) fields.insert(field_names_[i], batch[i]);
    const c10::IValue loss = (*loss_)({outputs, fields});
    TORCH_CHECK(loss.isTensor(), "the module's loss method returned a ", loss.tagKind(),
                ", not a Tensor");
    return loss.toTensor();
  }

  void To(const torch::Device& device) override { module_.to(device); }
  void SetTraining(bool training) override { module_.train(training); }
  Status Save(const std::string& path) override {
    try {
      module_.save(path);
      return Ok();
    } catch (const std::exception& error) {
      return MakeError(ErrorCode::kUnavailable, "cannot write " + path + ": " + error.what());
    }
  }

 private:
  torch::jit::Module module_;
  std::vector<std::string> field_names_;
  std::vector<std::pair<std::string, std::size_t>> forward_arguments_;  // name, field
  std::vector<std::size_t> dict_fields_;  // forward(self, batch: Dict[str, Tensor])
  std::optional<torch::jit::Method> loss_;
};

}  // namespace

Result<std::unique_ptr<TrainingModel>> LoadScriptedModel(const std::string& path) {
  try {
    torch::jit::Module module = torch::jit::load(path);
    if (!module.find_method("forward")) {
      return InvalidArgument("--torchscript", "\"" + path + "\" has no forward method");
    }
    return std::unique_ptr<TrainingModel>(std::make_unique<ScriptedModel>(std::move(module)));
  } catch (const std::exception& error) {
    return InvalidArgument("--torchscript",
                           "cannot load \"" + path + "\" as TorchScript: " + error.what());
  }
}

}  // namespace fulcrum::trainer
