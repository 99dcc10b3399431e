// dataset.json of a packed dataset (docs/dataset-format.md): the sample count and each field's
// element type, per-sample shape, file and class count, or the list of shards. Torch-free and
// fuzzed; every error names the file and the key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

enum class ElementType { kUint8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32 };

std::string_view NameOf(ElementType type);      // "uint8", as dataset.json spells it
std::string_view NpyDescrOf(ElementType type);  // "|u1", as the .npy header spells it
std::size_t BytesOf(ElementType type);
bool IsInteger(ElementType type);

struct FieldSpec {
  std::string name;
  ElementType type = ElementType::kFloat32;
  std::vector<int64_t> shape;      // one sample's; empty for a scalar
  std::string file;                // in the dataset's directory
  std::optional<int64_t> classes;  // integer fields: every value in [0, classes)

  int64_t ElementsPerSample() const;
  std::size_t BytesPerSample() const {
    return static_cast<std::size_t>(ElementsPerSample()) * BytesOf(type);
  }
  // Same name, type, shape and classes (the file may differ): what shards must agree on.
  bool SameLayout(const FieldSpec& other) const;
};

struct DatasetSpec {
  // A dataset of its own: samples >= 1 and fields. A list of shards: shards only.
  int64_t samples = 0;
  std::vector<FieldSpec> fields;
  std::vector<std::string> shards;  // subdirectory names, in order
};

// `path` names dataset.json in errors.
Result<DatasetSpec> ParseDatasetSpec(std::string_view json_text, const std::string& path);

}  // namespace fulcrum::trainer
