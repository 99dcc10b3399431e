// Training data by sample index, so any rank can produce any sample: a packed dataset
// (packed_dataset.h), a deterministic synthetic task (each sample generated from its index) or
// a file of fixed-size records.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/data/dataset_options.h"

namespace fulcrum::trainer {

// One named field of every sample. The synthetic and record datasets have two: "input" (float32)
// and "label" (int64); a packed dataset has the fields its dataset.json declares.
struct DataField {
  std::string name;
  std::vector<int64_t> shape;  // one sample's, without the batch dimension; [] for a scalar
  torch::ScalarType type = torch::kFloat32;
  std::optional<int64_t> classes;  // integer fields: every value is in [0, classes)
};

// The samples at some indices: one tensor [b, shape...] per field, in Dataset::fields() order,
// in the field's own dtype (uint8 images are cast on the device: device_transform.h).
struct Batch {
  std::vector<torch::Tensor> fields;
};

// "image, label": the fields' names, for errors that list them.
std::string FieldNames(const std::vector<DataField>& fields);

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual const std::vector<DataField>& fields() const = 0;
  virtual Batch Get(std::span<const int64_t> indices) = 0;

  std::optional<std::size_t> FieldIndex(std::string_view name) const;
  std::string FieldNames() const;  // "image, label": for errors that list the fields
};

Result<std::unique_ptr<Dataset>> MakeDataset(const DatasetOptions& options);

}  // namespace fulcrum::trainer
