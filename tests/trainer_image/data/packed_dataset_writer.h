// Writes packed datasets (docs/dataset-format.md) for tests: .npy files with NumPy's version 1.0
// header and a dataset.json, so the tests need no Python. tests/python checks the same format
// against NumPy itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fulcrum::testing {

// One .npy file: `descr` ("|u1", "<i8", ...), `shape` (samples first), the raw bytes.
void WriteNpy(const std::string& path, const std::string& descr, const std::vector<int64_t>& shape,
              const void* data, std::size_t bytes);

struct TestField {
  std::string name;
  std::string dtype;            // dataset.json's name: "uint8", "int64", ...
  std::vector<int64_t> shape;   // one sample's
  std::vector<std::byte> data;  // samples x shape elements, little-endian
  int64_t classes = 0;          // 0: not declared
  // To write a .npy that disagrees with dataset.json: its own dtype or per-sample shape.
  std::string npy_dtype;
  std::vector<int64_t> npy_shape;
};

// dataset.json and one <name>.npy per field in `directory` (created).
void WritePackedDataset(const std::string& directory, int64_t samples,
                        const std::vector<TestField>& fields);

template <typename T>
std::vector<std::byte> BytesOf(const std::vector<T>& values) {
  const auto* begin = reinterpret_cast<const std::byte*>(values.data());
  return std::vector<std::byte>(begin, begin + values.size() * sizeof(T));
}

}  // namespace fulcrum::testing
