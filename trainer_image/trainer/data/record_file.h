// A --data-file of fixed-size records: --record-features float32 values, then one int32 label,
// little-endian, back to back. Torch-free, so it is tested and fuzzed without libtorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

class RecordFile {
 public:
  // Checks that the file holds a whole, positive number of records of `features` values and
  // that it can be read; labels are checked against `classes` as records are read.
  static Result<RecordFile> Open(const std::string& path, int features, int classes);

  int64_t size() const { return records_; }
  int features() const { return features_; }
  static std::size_t RecordBytes(int features) {
    return static_cast<std::size_t>(features) * 4 + 4;
  }

  // Reads record `index` into `features` (features() values) and returns its label. Fails,
  // naming the file and the record, if the record cannot be read (e.g. the file shrank) or its
  // label is not in [0, classes): cross_entropy would fail on it far from the cause.
  Result<int32_t> Read(int64_t index, std::span<float> features);

 private:
  RecordFile(std::string path, int features, int classes, int64_t records);

  std::string path_;
  std::ifstream file_;
  int features_;
  int classes_;
  int64_t records_;
  std::vector<char> record_;
};

}  // namespace fulcrum::trainer
