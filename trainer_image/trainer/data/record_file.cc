#include "trainer_image/trainer/data/record_file.h"

#include <cstring>
#include <filesystem>

namespace fulcrum::trainer {

RecordFile::RecordFile(std::string path, int features, int classes, int64_t records)
    : path_(std::move(path)),
      file_(path_, std::ios::binary),
      features_(features),
      classes_(classes),
      records_(records),
      record_(RecordBytes(features)) {}

Result<RecordFile> RecordFile::Open(const std::string& path, int features, int classes) {
  if (features < 1) return InvalidArgument("--record-features", "must be >= 1");
  if (classes < 1) return InvalidArgument("--classes", "must be >= 1");
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  if (error) return InvalidArgument("--data-file", "cannot read \"" + path + "\"");
  const std::size_t record_bytes = RecordBytes(features);
  if (bytes == 0 || bytes % record_bytes != 0) {
    return InvalidArgument("--data-file", "size " + std::to_string(bytes) +
                                              " is not a positive multiple of the record size " +
                                              std::to_string(record_bytes) +
                                              " (--record-features x 4 + 4)");
  }
  RecordFile file(path, features, classes, static_cast<int64_t>(bytes / record_bytes));
  if (!file.file_) return InvalidArgument("--data-file", "cannot open \"" + path + "\"");
  return file;
}

Result<int32_t> RecordFile::Read(int64_t index, std::span<float> features) {
  const std::string where = "record " + std::to_string(index) + " of \"" + path_ + "\"";
  if (index < 0 || index >= records_) {
    return InvalidArgument("index",
                           where + " is past the " + std::to_string(records_) + " records");
  }
  if (features.size() != static_cast<std::size_t>(features_)) {
    return InvalidArgument("features", where + ": wrong number of features asked for");
  }
  file_.clear();
  file_.seekg(static_cast<std::streamoff>(index * static_cast<int64_t>(record_.size())));
  file_.read(record_.data(), static_cast<std::streamsize>(record_.size()));
  if (!file_ || file_.gcount() != static_cast<std::streamsize>(record_.size())) {
    return MakeError(ErrorCode::kFailedPrecondition,
                     where + " cannot be read (did the file change?)");
  }
  std::memcpy(features.data(), record_.data(), record_.size() - 4);
  int32_t label = 0;
  std::memcpy(&label, record_.data() + record_.size() - 4, 4);
  if (label < 0 || label >= classes_) {
    return InvalidArgument("--data-file", where + " has label " + std::to_string(label) +
                                              ", not a class in [0, " + std::to_string(classes_) +
                                              ") (--classes)");
  }
  return label;
}

}  // namespace fulcrum::trainer
