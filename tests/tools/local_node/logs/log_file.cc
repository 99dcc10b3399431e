#include "tests/tools/local_node/logs/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace fulcrum::local_node {
namespace {

Error FileError(const std::filesystem::path& path, std::string_view action) {
  return MakeError(ErrorCode::kInternal,
                   std::string(action) + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

LogFileReader::LogFileReader(std::filesystem::path path) : path_(std::move(path)) {}

LogFileReader::~LogFileReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool LogFileReader::TryOpen() {
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  return fd_ >= 0;
}

Status LogFileReader::SeekToLastLines(std::int64_t lines) {
  if (!TryOpen()) return Ok();
  struct stat status {};
  if (::fstat(fd_, &status) != 0) return FileError(path_, "cannot stat");
  const std::int64_t size = status.st_size;
  if (lines == 0) {
    offset_ = size;
    return Ok();
  }
  // Walk back from the end counting newlines; the one ending the file closes
  // the last line instead of opening an empty one after it.
  constexpr std::int64_t kBlock = 64 * 1024;
  std::vector<char> block(kBlock);
  std::int64_t newlines = 0;
  for (std::int64_t block_end = size; block_end > 0;) {
    const std::int64_t block_start = std::max<std::int64_t>(0, block_end - kBlock);
    const ssize_t got = ::pread(fd_, block.data(), block_end - block_start, block_start);
    if (got < 0) return FileError(path_, "cannot read");
    if (got != block_end - block_start) break;  // shrank under us: fall back to the whole file
    for (std::int64_t i = got - 1; i >= 0; --i) {
      const std::int64_t position = block_start + i;
      if (block[i] != '\n' || position == size - 1) continue;
      if (++newlines == lines) {
        offset_ = position + 1;
        return Ok();
      }
    }
    block_end = block_start;
  }
  offset_ = 0;  // fewer lines than asked for: all of them
  return Ok();
}

Result<std::size_t> LogFileReader::Read(std::string& out, std::size_t max_bytes) {
  if (!TryOpen() || max_bytes == 0) return std::size_t{0};
  struct stat status {};
  if (::fstat(fd_, &status) != 0) return FileError(path_, "cannot stat");
  if (status.st_size < offset_) offset_ = 0;
  const std::size_t old_size = out.size();
  out.resize(old_size + max_bytes);
  const ssize_t got = ::pread(fd_, out.data() + old_size, max_bytes, offset_);
  if (got < 0) {
    out.resize(old_size);
    return FileError(path_, "cannot read");
  }
  out.resize(old_size + static_cast<std::size_t>(got));
  offset_ += got;
  return static_cast<std::size_t>(got);
}

}  // namespace fulcrum::local_node
