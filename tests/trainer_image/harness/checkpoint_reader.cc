#include "tests/trainer_image/harness/checkpoint_reader.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace fulcrum::testing {
namespace {

constexpr std::size_t kMagicBytes = 16;
constexpr std::size_t kAlignment = 64;

uint64_t Fnv1a(const char* data, std::size_t size) {
  uint64_t hash = 1469598103934665603ULL;
  for (std::size_t i = 0; i < size; ++i)
    hash = (hash ^ static_cast<unsigned char>(data[i])) * 1099511628211ULL;
  return hash;
}

}  // namespace

std::vector<float> CheckpointTensor::AsFloats() const {
  if (dtype != "float32") return {};
  std::vector<float> values(bytes.size() / sizeof(float));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(float));
  return values;
}

std::vector<float> Checkpoint::Floats(const std::string& group) const {
  std::vector<float> all;
  for (const CheckpointTensor& tensor : tensors) {
    if (tensor.group != group) continue;
    const std::vector<float> values = tensor.AsFloats();
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

std::optional<Checkpoint> ReadCheckpointFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(file)), {});
  if (bytes.size() < kMagicBytes + 16 || bytes.compare(0, 15, "FULCRUM-CKPT-2\n") != 0)
    return std::nullopt;
  uint64_t hash = 0, header_length = 0;
  std::memcpy(&hash, bytes.data() + bytes.size() - 8, 8);
  if (hash != Fnv1a(bytes.data(), bytes.size() - 8)) return std::nullopt;
  std::memcpy(&header_length, bytes.data() + kMagicBytes, 8);
  Checkpoint checkpoint;
  checkpoint.header = nlohmann::json::parse(bytes.substr(kMagicBytes + 8, header_length));
  const std::size_t data_start =
      (kMagicBytes + 8 + header_length + kAlignment - 1) / kAlignment * kAlignment;
  for (const auto& entry : checkpoint.header.at("tensors")) {
    checkpoint.tensors.push_back({entry.at("group"), entry.at("name"), entry.at("dtype"),
                                  entry.at("shape").get<std::vector<int64_t>>(),
                                  bytes.substr(data_start + entry.at("offset").get<std::size_t>(),
                                               entry.at("bytes").get<std::size_t>())});
  }
  return checkpoint;
}

}  // namespace fulcrum::testing
