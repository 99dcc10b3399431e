// A packed dataset on disk (docs/dataset-format.md), opened and checked: dataset.json, and each
// field's .npy memory-mapped. Everything is validated before the first step (headers, dtypes,
// shapes, sizes, label ranges), so a bad dataset fails the job at start with the file and the
// field named, not a step later. Torch-free: samples come out as bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/data/dataset_spec.h"
#include "trainer_image/trainer/data/mapped_file.h"

namespace fulcrum::trainer {

class PackedDataset {
 public:
  // `directory` holds dataset.json (a dataset, or a list of shards that are datasets).
  static Result<PackedDataset> Open(const std::string& directory);

  int64_t size() const { return samples_; }
  const std::vector<FieldSpec>& fields() const { return fields_; }
  // The index of the field called `name` in fields(), or an error listing the fields.
  Result<std::size_t> FieldIndex(const std::string& name) const;

  // Copies field `field` of the samples at `indices` into `out`, one sample after another
  // (out.size() == indices.size() * fields()[field].BytesPerSample()). Indices must be in
  // [0, size()); the loader's sample order guarantees it.
  void Gather(std::size_t field, std::span<const int64_t> indices, std::span<std::byte> out) const;

 private:
  struct Shard {
    int64_t first = 0;  // global index of its sample 0
    int64_t samples = 0;
    std::vector<MappedFile> files;  // one per field, in fields_ order
    std::vector<std::size_t> data_offsets;
  };
  const Shard& ShardOf(int64_t index) const;

  int64_t samples_ = 0;
  std::vector<FieldSpec> fields_;
  std::vector<Shard> shards_;
};

}  // namespace fulcrum::trainer
