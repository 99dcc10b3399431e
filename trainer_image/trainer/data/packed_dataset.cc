#include "trainer_image/trainer/data/packed_dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainer_image/trainer/data/npy_header.h"

namespace fulcrum::trainer {
namespace {

Result<DatasetSpec> ReadSpec(const std::filesystem::path& directory) {
  const std::filesystem::path path = directory / "dataset.json";
  std::ifstream file(path);
  if (!file) {
    return InvalidArgument(path.string(),
                           "is missing: a packed dataset is a directory with "
                           "dataset.json and one .npy per field (write it with "
                           "fulcrum-pack; docs/dataset-format.md)");
  }
  std::stringstream text;
  text << file.rdbuf();
  return ParseDatasetSpec(text.str(), path.string());
}

template <typename Integer>
Status CheckRange(const std::byte* data, int64_t count, int64_t elements_per_sample,
                  int64_t classes, const std::string& where) {
  for (int64_t i = 0; i < count; ++i) {
    Integer value;
    std::memcpy(&value, data + i * static_cast<int64_t>(sizeof(Integer)), sizeof(Integer));
    if (static_cast<int64_t>(value) < 0 || static_cast<int64_t>(value) >= classes) {
      return InvalidArgument(where, "sample " + std::to_string(i / elements_per_sample) +
                                        " holds " + std::to_string(static_cast<int64_t>(value)) +
                                        ", outside [0, " + std::to_string(classes) + ") (classes)");
    }
  }
  return Ok();
}

// Every value of an integer field with `classes` lies in [0, classes).
Status CheckClasses(const FieldSpec& field, const std::byte* data, int64_t samples,
                    const std::string& where) {
  const int64_t count = samples * field.ElementsPerSample();
  const int64_t per_sample = field.ElementsPerSample();
  const int64_t classes = *field.classes;
  switch (field.type) {
    case ElementType::kUint8:
      return CheckRange<uint8_t>(data, count, per_sample, classes, where);
    case ElementType::kInt8:
      return CheckRange<int8_t>(data, count, per_sample, classes, where);
    case ElementType::kInt16:
      return CheckRange<int16_t>(data, count, per_sample, classes, where);
    case ElementType::kInt32:
      return CheckRange<int32_t>(data, count, per_sample, classes, where);
    case ElementType::kInt64:
      return CheckRange<int64_t>(data, count, per_sample, classes, where);
    default:
      return Ok();
  }
}

// Maps and checks one field's .npy against dataset.json.
Result<MappedFile> OpenField(const std::filesystem::path& directory, const FieldSpec& field,
                             int64_t samples, std::size_t& data_offset) {
  const std::string path = (directory / field.file).string();
  const std::string where = path + " (field " + field.name + ")";
  Result<MappedFile> file = MappedFile::Open(path);
  if (!file.ok()) return InvalidArgument(where, file.error().message);
  Result<NpyHeader> header = ParseNpyHeader(file->bytes(), path);
  if (!header.ok()) return InvalidArgument(where, header.error().message);
  if (header->descr != NpyDescrOf(field.type)) {
    return InvalidArgument(where, "holds '" + header->descr + "' but dataset.json says " +
                                      std::string(NameOf(field.type)) + " ('" +
                                      std::string(NpyDescrOf(field.type)) + "', little-endian)");
  }
  if (header->fortran_order)
    return InvalidArgument(where,
                           "is in Fortran order; save it in C order (numpy.ascontiguousarray)");
  std::vector<int64_t> expected = {samples};
  expected.insert(expected.end(), field.shape.begin(), field.shape.end());
  if (header->shape != expected) {
    auto text = [](const std::vector<int64_t>& shape) {
      std::string out = "[";
      for (std::size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
      return out + "]";
    };
    return InvalidArgument(where, "has shape " + text(header->shape) + " but dataset.json says " +
                                      text(expected) + " (samples, then the field's shape)");
  }
  const std::size_t data_bytes = static_cast<std::size_t>(samples) * field.BytesPerSample();
  const std::size_t size = file->bytes().size();
  if (size != header->data_offset + data_bytes) {
    return InvalidArgument(
        where,
        "is " + std::to_string(size) + " bytes but its header and " + "shape need " +
            std::to_string(header->data_offset + data_bytes) +
            (size < header->data_offset + data_bytes ? " (truncated: was it copied completely?)"
                                                     : " (trailing bytes)"));
  }
  if (field.classes) {
    if (Status status =
            CheckClasses(field, file->bytes().data() + header->data_offset, samples, where);
        !status.ok())
      return status.error();
  }
  data_offset = header->data_offset;
  return file;
}

}  // namespace

Result<PackedDataset> PackedDataset::Open(const std::string& directory) {
  const std::filesystem::path root(directory);
  std::error_code error;
  if (!std::filesystem::is_directory(root, error))
    return InvalidArgument(directory, "is not a directory (a packed dataset is one)");
  Result<DatasetSpec> spec = ReadSpec(root);
  if (!spec.ok()) return spec.error();
  std::vector<std::filesystem::path> shard_directories;
  if (spec->shards.empty()) {
    shard_directories.push_back(root);
  } else {
    for (const std::string& shard : spec->shards) shard_directories.push_back(root / shard);
  }
  PackedDataset dataset;
  for (const std::filesystem::path& shard_directory : shard_directories) {
    DatasetSpec shard_spec = *spec;
    if (!spec->shards.empty()) {
      Result<DatasetSpec> own = ReadSpec(shard_directory);
      if (!own.ok()) return own.error();
      if (!own->shards.empty()) {
        return InvalidArgument((shard_directory / "dataset.json").string(),
                               "lists shards of its own; a shard must be a dataset");
      }
      shard_spec = std::move(*own);
    }
    if (dataset.fields_.empty()) {
      dataset.fields_ = shard_spec.fields;
    } else {
      const bool same =
          std::equal(dataset.fields_.begin(), dataset.fields_.end(), shard_spec.fields.begin(),
                     shard_spec.fields.end(),
                     [](const FieldSpec& a, const FieldSpec& b) { return a.SameLayout(b); });
      if (!same) {
        return InvalidArgument((shard_directory / "dataset.json").string(),
                               "has other fields than the first shard (every shard needs the "
                               "same names, dtypes, shapes and classes, in the same order)");
      }
    }
    Shard shard;
    shard.first = dataset.samples_;
    shard.samples = shard_spec.samples;
    for (const FieldSpec& field : shard_spec.fields) {
      std::size_t offset = 0;
      Result<MappedFile> file = OpenField(shard_directory, field, shard_spec.samples, offset);
      if (!file.ok()) return file.error();
      shard.files.push_back(std::move(*file));
      shard.data_offsets.push_back(offset);
    }
    dataset.samples_ += shard.samples;
    dataset.shards_.push_back(std::move(shard));
  }
  return dataset;
}

Result<std::size_t> PackedDataset::FieldIndex(const std::string& name) const {
  std::string names;
  for (std::size_t i = 0; i < fields_.size(); ++i) {
    if (fields_[i].name == name) return i;
    names += (names.empty() ? "" : ", ") + fields_[i].name;
  }
  return InvalidArgument(name, "is not a field of the dataset (its fields: " + names + ")");
}

const PackedDataset::Shard& PackedDataset::ShardOf(int64_t index) const {
  // The last shard whose first sample is at or before `index`.
  auto after = std::upper_bound(shards_.begin(), shards_.end(), index,
                                [](int64_t i, const Shard& shard) { return i < shard.first; });
  return *std::prev(after);
}

void PackedDataset::Gather(std::size_t field, std::span<const int64_t> indices,
                           std::span<std::byte> out) const {
  const std::size_t sample_bytes = fields_[field].BytesPerSample();
  std::byte* destination = out.data();
  for (int64_t index : indices) {
    const Shard& shard = shards_.size() == 1 ? shards_.front() : ShardOf(index);
    const std::byte* source = shard.files[field].bytes().data() + shard.data_offsets[field] +
                              static_cast<std::size_t>(index - shard.first) * sample_bytes;
    std::memcpy(destination, source, sample_bytes);
    destination += sample_bytes;
  }
}

}  // namespace fulcrum::trainer
