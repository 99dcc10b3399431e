// Fuzzes reading a --data-file of records: the first two input bytes choose --record-features
// (1..16) and the number of classes (1..16), the rest is the file (kept in memory, through a
// memfd). Opening accepts exactly files of a whole, positive number of records; every record
// then reads back with its bytes and a label in [0, classes), or an error naming it.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "trainer_image/trainer/data/record_file.h"

namespace {

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "record_file_fuzz: %s\n", what);
  std::abort();
}

// An anonymous in-memory file holding `bytes`, closed when it goes out of scope.
class MemoryFile {
 public:
  MemoryFile(const uint8_t* bytes, size_t size) : fd_(memfd_create("records", 0)) {
    if (fd_ < 0 || write(fd_, bytes, size) != static_cast<ssize_t>(size)) Violated("memfd");
  }
  ~MemoryFile() { close(fd_); }
  MemoryFile(const MemoryFile&) = delete;
  MemoryFile& operator=(const MemoryFile&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 2) return 0;
  const int features = bytes[0] % 16 + 1;
  const int classes = bytes[1] % 16 + 1;
  const uint8_t* file_bytes = bytes + 2;
  const size_t file_size = size - 2;
  const MemoryFile memory(file_bytes, file_size);
  const std::size_t record_bytes = fulcrum::trainer::RecordFile::RecordBytes(features);

  auto file = fulcrum::trainer::RecordFile::Open(memory.path(), features, classes);
  const bool whole = file_size > 0 && file_size % record_bytes == 0;
  if (file.ok() != whole) Violated("Open disagrees with the file's size");
  if (!file.ok()) return 0;
  if (file->size() != static_cast<int64_t>(file_size / record_bytes)) Violated("wrong count");

  std::vector<float> values(static_cast<std::size_t>(features));
  for (int64_t index = -1; index <= file->size(); ++index) {
    auto label = file->Read(index, values);
    if (index < 0 || index == file->size()) {
      if (label.ok()) Violated("read a record outside the file");
      continue;
    }
    const uint8_t* record = file_bytes + static_cast<std::size_t>(index) * record_bytes;
    int32_t stored = 0;
    std::memcpy(&stored, record + record_bytes - 4, 4);
    if (label.ok() != (stored >= 0 && stored < classes)) Violated("label check is wrong");
    if (label.ok() &&
        (*label != stored || std::memcmp(values.data(), record, record_bytes - 4) != 0))
      Violated("record read back differently");
  }
  return 0;
}
