#include "trainer_image/trainer/state/training_state.h"

#include <cstdio>
#include <cstring>

namespace fulcrum::trainer {
namespace {

constexpr std::size_t kHeaderBytes = 2 * sizeof(int64_t) + sizeof(double);

std::span<const std::byte> BytesOf(const torch::Tensor& tensor) {
  return {static_cast<const std::byte*>(tensor.data_ptr()), tensor.nbytes()};
}

}  // namespace

uint64_t Fnv1a(std::span<const std::byte> bytes, uint64_t hash) {
  for (std::byte b : bytes) hash = (hash ^ static_cast<uint64_t>(b)) * 1099511628211ULL;
  return hash;
}

std::size_t PackedSize(const std::vector<torch::Tensor>& tensors) {
  std::size_t size = kHeaderBytes;
  for (const torch::Tensor& tensor : tensors) size += tensor.nbytes();
  return size;
}

std::vector<std::byte> PackState(const std::vector<torch::Tensor>& tensors, Progress progress) {
  std::vector<std::byte> bytes(PackedSize(tensors));
  std::memcpy(bytes.data(), &progress.step, sizeof(int64_t));
  std::memcpy(bytes.data() + sizeof(int64_t), &progress.cursor, sizeof(int64_t));
  std::memcpy(bytes.data() + 2 * sizeof(int64_t), &progress.equivalent_samples, sizeof(double));
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
  std::memcpy(&progress.equivalent_samples, bytes.data() + 2 * sizeof(int64_t), sizeof(double));
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

}  // namespace fulcrum::trainer
