#include "trainer_image/trainer/state/training_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace fulcrum::trainer {
namespace {

constexpr char kMagic[16] = "FULCRUM-CKPT-1\n";
constexpr std::size_t kHeaderBytes = 2 * sizeof(int64_t);
constexpr std::size_t kKeptCheckpoints = 3;

uint64_t Fnv1a(std::span<const std::byte> bytes, uint64_t hash = 1469598103934665603ULL) {
  for (std::byte b : bytes) hash = (hash ^ static_cast<uint64_t>(b)) * 1099511628211ULL;
  return hash;
}

std::span<const std::byte> BytesOf(const torch::Tensor& tensor) {
  return {static_cast<const std::byte*>(tensor.data_ptr()), tensor.nbytes()};
}

Status WriteAll(int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written <= 0) return MakeError(ErrorCode::kUnavailable, std::strerror(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(written));
  }
  return Ok();
}

std::string CheckpointName(int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "checkpoint-%012ld.bin", static_cast<long>(step));
  return name;
}

std::optional<int64_t> StepOfCheckpoint(const std::filesystem::path& path) {
  long step = 0;
  const std::string name = path.filename().string();
  if (std::sscanf(name.c_str(), "checkpoint-%ld.bin", &step) != 1) return std::nullopt;
  if (name != CheckpointName(step)) return std::nullopt;  // temporary or foreign files
  return step;
}

}  // namespace

std::size_t PackedSize(const std::vector<torch::Tensor>& tensors) {
  std::size_t size = kHeaderBytes;
  for (const torch::Tensor& tensor : tensors) size += tensor.nbytes();
  return size;
}

std::vector<std::byte> PackState(const std::vector<torch::Tensor>& tensors, Progress progress) {
  std::vector<std::byte> bytes(PackedSize(tensors));
  std::memcpy(bytes.data(), &progress.step, sizeof(int64_t));
  std::memcpy(bytes.data() + sizeof(int64_t), &progress.cursor, sizeof(int64_t));
  std::size_t offset = kHeaderBytes;
  for (const torch::Tensor& tensor : tensors) {
    const torch::Tensor dense = tensor.detach().to(torch::kCPU).contiguous();  // GPU: copied
    std::memcpy(bytes.data() + offset, dense.data_ptr(), dense.nbytes());
    offset += dense.nbytes();
  }
  return bytes;
}

Result<Progress> UnpackState(std::span<const std::byte> bytes,
                             const std::vector<torch::Tensor>& tensors) {
  if (bytes.size() != PackedSize(tensors)) {
    return InvalidArgument("state", "has " + std::to_string(bytes.size()) +
                                        " bytes, this model needs " +
                                        std::to_string(PackedSize(tensors)) +
                                        ": same --model and sizes on every trainer?");
  }
  Progress progress;
  std::memcpy(&progress.step, bytes.data(), sizeof(int64_t));
  std::memcpy(&progress.cursor, bytes.data() + sizeof(int64_t), sizeof(int64_t));
  std::size_t offset = kHeaderBytes;
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& tensor : tensors) {
    // Through copy_, so GPU tensors are filled as well as CPU ones.
    tensor.copy_(torch::from_blob(const_cast<std::byte*>(bytes.data() + offset), tensor.sizes(),
                                  tensor.options().device(torch::kCPU)));
    offset += tensor.nbytes();
  }
  return progress;
}

std::string Checksum(const std::vector<torch::Tensor>& tensors) {
  uint64_t hash = 1469598103934665603ULL;
  for (const torch::Tensor& tensor : tensors)
    hash = Fnv1a(BytesOf(tensor.detach().to(torch::kCPU).contiguous()), hash);
  char text[17];
  std::snprintf(text, sizeof text, "%016lx", static_cast<unsigned long>(hash));
  return text;
}

Status WriteCheckpoint(const std::string& directory, const std::string& writer, int64_t step,
                       std::span<const std::byte> state) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  const std::string name = CheckpointName(step);
  const std::filesystem::path final_path = std::filesystem::path(directory) / name;
  const std::filesystem::path temporary =
      std::filesystem::path(directory) / ("." + name + "." + writer + ".tmp");
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return InvalidArgument("--checkpoint-dir",
                           "cannot write " + temporary.string() + ": " + std::strerror(errno));
  }
  const uint64_t length = state.size();
  const uint64_t hash = Fnv1a(state);
  Status status = WriteAll(fd, std::as_bytes(std::span(kMagic)));
  if (status.ok()) status = WriteAll(fd, std::as_bytes(std::span(&length, 1)));
  if (status.ok()) status = WriteAll(fd, state);
  if (status.ok()) status = WriteAll(fd, std::as_bytes(std::span(&hash, 1)));
  if (status.ok() && ::fsync(fd) != 0)
    status = MakeError(ErrorCode::kUnavailable, std::strerror(errno));
  ::close(fd);
  if (!status.ok()) {
    std::filesystem::remove(temporary, error);
    return status;
  }
  std::filesystem::rename(temporary, final_path, error);
  if (error)
    return MakeError(ErrorCode::kUnavailable,
                     "rename " + temporary.string() + ": " + error.message());
  if (const int dir = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);  // make the rename itself durable
    ::close(dir);
  }
  // Keep the newest few; another rank may be pruning too, so errors are expected and ignored.
  std::vector<std::pair<int64_t, std::filesystem::path>> all;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (auto found = StepOfCheckpoint(entry.path())) all.emplace_back(*found, entry.path());
  }
  std::sort(all.rbegin(), all.rend());
  for (std::size_t i = kKeptCheckpoints; i < all.size(); ++i)
    std::filesystem::remove(all[i].second, error);
  return Ok();
}

Result<std::optional<std::vector<std::byte>>> ReadLatestCheckpoint(const std::string& directory) {
  std::error_code error;
  if (!std::filesystem::exists(directory, error)) return std::optional<std::vector<std::byte>>{};
  std::vector<std::pair<int64_t, std::filesystem::path>> all;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (auto found = StepOfCheckpoint(entry.path())) all.emplace_back(*found, entry.path());
  }
  std::sort(all.rbegin(), all.rend());
  for (const auto& [step, path] : all) {
    std::ifstream file(path, std::ios::binary);
    char magic[sizeof kMagic];
    uint64_t length = 0;
    if (!file.read(magic, sizeof magic) || std::memcmp(magic, kMagic, sizeof magic) != 0) continue;
    if (!file.read(reinterpret_cast<char*>(&length), sizeof length) || length > (uint64_t{1} << 36))
      continue;
    std::vector<std::byte> state(length);
    uint64_t hash = 0;
    if (!file.read(reinterpret_cast<char*>(state.data()), static_cast<std::streamsize>(length)))
      continue;
    if (!file.read(reinterpret_cast<char*>(&hash), sizeof hash) || hash != Fnv1a(state)) continue;
    return std::optional<std::vector<std::byte>>(std::move(state));
  }
  return std::optional<std::vector<std::byte>>{};
}

}  // namespace fulcrum::trainer
