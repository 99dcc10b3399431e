#include "tests/trainer_image/data/packed_dataset_writer.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace fulcrum::testing {

void WriteNpy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, std::size_t bytes) {
  std::string dimensions;
  for (int64_t dimension : shape) dimensions += std::to_string(dimension) + ", ";
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dimensions + "), }";
  // Padded with spaces and a newline so that the data starts at a multiple of 64 bytes.
  const std::size_t prefix = 10;
  header.append(64 - (prefix + header.size() + 1) % 64, ' ');
  header += '\n';
  std::ofstream file(path, std::ios::binary);
  file.write("\x93NUMPY\x01\x00", 8);
  const auto length = static_cast<uint16_t>(header.size());
  const char length_bytes[2] = {static_cast<char>(length & 0xFF), static_cast<char>(length >> 8)};
  file.write(length_bytes, 2);
  file << header;
  file.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!file) throw std::runtime_error("cannot write " + path);
}

void WritePackedDataset(const std::string& directory, int64_t samples,
                        const std::vector<TestField>& fields) {
  static const std::map<std::string, std::string> kDescr = {
      {"uint8", "|u1"}, {"int8", "|i1"},    {"int16", "<i2"},    {"int32", "<i4"},
      {"int64", "<i8"}, {"float16", "<f2"}, {"bfloat16", "<u2"}, {"float32", "<f4"}};
  std::filesystem::create_directories(directory);
  nlohmann::json spec = {{"format", "fulcrum.dataset"}, {"version", 1}, {"samples", samples}};
  spec["fields"] = nlohmann::json::array();
  for (const TestField& field : fields) {
    nlohmann::json entry = {{"name", field.name}, {"dtype", field.dtype}, {"shape", field.shape}};
    if (field.classes > 0) entry["classes"] = field.classes;
    spec["fields"].push_back(entry);
    const std::vector<int64_t>& sample_shape =
        field.npy_shape.empty() ? field.shape : field.npy_shape;
    std::vector<int64_t> shape = {samples};
    shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
    WriteNpy(directory + "/" + field.name + ".npy",
             kDescr.at(field.npy_dtype.empty() ? field.dtype : field.npy_dtype), shape,
             field.data.data(), field.data.size());
  }
  std::ofstream(directory + "/dataset.json") << spec.dump(2) << "\n";
}

}  // namespace fulcrum::testing
