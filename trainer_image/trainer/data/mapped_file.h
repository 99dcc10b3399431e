// A read-only memory map of a whole file, unmapped when it goes. The packed dataset's fields are
// read through these: no per-sample seek or read call, and the page cache is shared by every
// trainer on the node.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "common/result.h"

namespace fulcrum::trainer {

class MappedFile {
 public:
  static Result<MappedFile> Open(const std::string& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(std::string path, const std::byte* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Unmap();

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace fulcrum::trainer
