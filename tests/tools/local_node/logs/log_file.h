// A container's log file read the way `tail -f` follows one: opened as soon as
// it exists, read from a remembered offset in blocks as it grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "common/result.h"

namespace fulcrum::local_node {

class LogFileReader {
 public:
  explicit LogFileReader(std::filesystem::path path);
  ~LogFileReader();
  LogFileReader(const LogFileReader&) = delete;
  LogFileReader& operator=(const LogFileReader&) = delete;

  // Opens the file if it exists by now; a container that has not written yet
  // may have none, which reads as empty. True once open.
  bool TryOpen();

  // Moves the read position to the start of the last `lines` lines of what the
  // file holds now (a final line without its newline counts as a line), so
  // `lines` = 0 skips everything written so far. No-op while the file is absent:
  // once it appears, every line in it is new.
  Status SeekToLastLines(std::int64_t lines);

  // Appends to `out` up to `max_bytes` from the read position and advances it.
  // Returns how many bytes were read; 0 means nothing more for now. A file that
  // shrank (truncated) is read again from its start.
  Result<std::size_t> Read(std::string& out, std::size_t max_bytes);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  std::int64_t offset_ = 0;
};

}  // namespace fulcrum::local_node
