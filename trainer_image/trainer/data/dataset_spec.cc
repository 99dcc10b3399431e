#include "trainer_image/trainer/data/dataset_spec.h"

#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

namespace fulcrum::trainer {
namespace {

struct TypeRow {
  ElementType type;
  std::string_view name;
  std::string_view npy_descr;
  std::size_t bytes;
  bool integer;
};

// NumPy has no bfloat16: its raw 16 bits are stored as <u2 and dataset.json says bfloat16.
constexpr std::array<TypeRow, 8> kTypes = {{
    {ElementType::kUint8, "uint8", "|u1", 1, true},
    {ElementType::kInt8, "int8", "|i1", 1, true},
    {ElementType::kInt16, "int16", "<i2", 2, true},
    {ElementType::kInt32, "int32", "<i4", 4, true},
    {ElementType::kInt64, "int64", "<i8", 8, true},
    {ElementType::kFloat16, "float16", "<f2", 2, false},
    {ElementType::kBFloat16, "bfloat16", "<u2", 2, false},
    {ElementType::kFloat32, "float32", "<f4", 4, false},
}};

const TypeRow& RowOf(ElementType type) {
  for (const TypeRow& row : kTypes) {
    if (row.type == type) return row;
  }
  return kTypes.back();
}

std::string TypeNames() {
  std::string names;
  for (const TypeRow& row : kTypes) names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

// A plain name inside the dataset's directory: no separators, not . or ..
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

bool IsFieldName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// At most this many elements in one sample of one field (a 4096 x 4096 x 4 image is 2^26).
constexpr int64_t kMaxElementsPerSample = int64_t{1} << 32;

// `prefix` + key names an unknown key in the error.
Status CheckKeys(const nlohmann::json& object, const std::set<std::string>& allowed,
                 const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    if (!allowed.contains(key)) {
      std::string names;
      for (const std::string& name : allowed) names += (names.empty() ? "" : ", ") + name;
      return InvalidArgument(prefix + key, "is not a known key (known: " + names +
                                               "; free-form data belongs in meta)");
    }
  }
  return Ok();
}

Result<int64_t> PositiveInteger(const nlohmann::json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1)
    return InvalidArgument(where, "must be an integer >= 1");
  return value.get<int64_t>();
}

Result<FieldSpec> ParseField(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgument(where, "must be an object {name, dtype, shape}");
  if (Status status = CheckKeys(json, {"name", "dtype", "shape", "file", "classes"}, where + ".");
      !status.ok())
    return status.error();
  FieldSpec field;
  if (!json.contains("name") || !json["name"].is_string() ||
      !IsFieldName(field.name = json["name"].get<std::string>())) {
    return InvalidArgument(where + ".name",
                           "must be a name of letters, digits and _ (not first), at most 64");
  }
  const std::string at = where + " (" + field.name + ")";
  if (!json.contains("dtype") || !json["dtype"].is_string())
    return InvalidArgument(at + ".dtype", "is required: one of " + TypeNames());
  const std::string dtype = json["dtype"].get<std::string>();
  bool known = false;
  for (const TypeRow& row : kTypes) {
    if (row.name == dtype) field.type = row.type, known = true;
  }
  if (!known)
    return InvalidArgument(at + ".dtype", "\"" + dtype + "\" is not one of " + TypeNames());
  if (!json.contains("shape") || !json["shape"].is_array())
    return InvalidArgument(at + ".shape", "is required: one sample's shape, [] for a scalar");
  int64_t elements = 1;
  for (const nlohmann::json& dimension : json["shape"]) {
    Result<int64_t> size = PositiveInteger(dimension, at + ".shape[]");
    if (!size.ok()) return size.error();
    if (*size > kMaxElementsPerSample / elements)
      return InvalidArgument(at + ".shape", "is too large for one sample");
    elements *= *size;
    field.shape.push_back(*size);
  }
  field.file = field.name + ".npy";
  if (json.contains("file")) {
    if (!json["file"].is_string() || !IsPlainFileName(json["file"].get<std::string>()))
      return InvalidArgument(at + ".file", "must be a file name in the dataset's directory");
    field.file = json["file"].get<std::string>();
  }
  if (json.contains("classes")) {
    if (!IsInteger(field.type))
      return InvalidArgument(at + ".classes", "applies to integer dtypes only");
    Result<int64_t> classes = PositiveInteger(json["classes"], at + ".classes");
    if (!classes.ok()) return classes.error();
    field.classes = *classes;
  }
  return field;
}

}  // namespace

std::string_view NameOf(ElementType type) {
  return RowOf(type).name;
}
std::string_view NpyDescrOf(ElementType type) {
  return RowOf(type).npy_descr;
}
std::size_t BytesOf(ElementType type) {
  return RowOf(type).bytes;
}
bool IsInteger(ElementType type) {
  return RowOf(type).integer;
}

int64_t FieldSpec::ElementsPerSample() const {
  int64_t elements = 1;
  for (int64_t dimension : shape) elements *= dimension;
  return elements;
}

bool FieldSpec::SameLayout(const FieldSpec& other) const {
  return name == other.name && type == other.type && shape == other.shape &&
         classes == other.classes;
}

Result<DatasetSpec> ParseDatasetSpec(std::string_view json_text, const std::string& path) {
  const nlohmann::json json = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object())
    return InvalidArgument(path, "is not a JSON object (docs/dataset-format.md)");
  if (!json.contains("format") || json["format"] != "fulcrum.dataset")
    return InvalidArgument(path + ": format", "must be \"fulcrum.dataset\"");
  if (!json.contains("version") || json["version"] != 1)
    return InvalidArgument(path + ": version", "must be 1 (this trainer reads version 1)");
  DatasetSpec spec;
  if (json.contains("shards")) {
    if (Status status = CheckKeys(json, {"format", "version", "shards", "meta"}, path + ": ");
        !status.ok())
      return status.error();
    if (!json["shards"].is_array() || json["shards"].empty())
      return InvalidArgument(path + ": shards", "must be a non-empty list of subdirectories");
    std::set<std::string> seen;
    for (const nlohmann::json& shard : json["shards"]) {
      if (!shard.is_string() || !IsPlainFileName(shard.get<std::string>()) ||
          !seen.insert(shard.get<std::string>()).second) {
        return InvalidArgument(path + ": shards[]",
                               "each must be a distinct subdirectory name (no /, not ..)");
      }
      spec.shards.push_back(shard.get<std::string>());
    }
    return spec;
  }
  if (Status status =
          CheckKeys(json, {"format", "version", "samples", "fields", "meta"}, path + ": ");
      !status.ok())
    return status.error();
  if (!json.contains("samples"))
    return InvalidArgument(path + ": samples", "is required (or shards)");
  Result<int64_t> samples = PositiveInteger(json["samples"], path + ": samples");
  if (!samples.ok()) return samples.error();
  spec.samples = *samples;
  if (!json.contains("fields") || !json["fields"].is_array() || json["fields"].empty())
    return InvalidArgument(path + ": fields", "must be a non-empty list of fields");
  std::set<std::string> names, files;
  for (std::size_t i = 0; i < json["fields"].size(); ++i) {
    Result<FieldSpec> field =
        ParseField(json["fields"][i], path + ": fields[" + std::to_string(i) + "]");
    if (!field.ok()) return field.error();
    if (!names.insert(field->name).second)
      return InvalidArgument(path + ": fields", "name \"" + field->name + "\" appears twice");
    if (!files.insert(field->file).second)
      return InvalidArgument(path + ": fields", "file \"" + field->file + "\" appears twice");
    spec.fields.push_back(std::move(*field));
  }
  return spec;
}

}  // namespace fulcrum::trainer
