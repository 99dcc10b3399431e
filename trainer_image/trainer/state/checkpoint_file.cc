#include "trainer_image/trainer/state/checkpoint_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <utility>

namespace fulcrum::trainer {
namespace {

constexpr char kMagic[16] = "FULCRUM-CKPT-2\n";  // 15 characters and the terminating zero
constexpr char kVersion1Magic[16] = "FULCRUM-CKPT-1\n";
constexpr std::size_t kAlignment = 64;
constexpr std::size_t kKeptCheckpoints = 3;
constexpr uint64_t kMaxHeaderBytes = uint64_t{1} << 30;

constexpr std::array<std::pair<torch::ScalarType, const char*>, 10> kDtypes = {{
    {torch::kFloat32, "float32"},
    {torch::kFloat64, "float64"},
    {torch::kFloat16, "float16"},
    {torch::kBFloat16, "bfloat16"},
    {torch::kInt64, "int64"},
    {torch::kInt32, "int32"},
    {torch::kInt16, "int16"},
    {torch::kInt8, "int8"},
    {torch::kUInt8, "uint8"},
    {torch::kBool, "bool"},
}};

std::string DtypeName(torch::ScalarType type) {
  for (const auto& [scalar, name] : kDtypes) {
    if (scalar == type) return name;
  }
  return c10::toString(type);
}

std::optional<torch::ScalarType> DtypeOf(const std::string& name) {
  for (const auto& [scalar, dtype] : kDtypes) {
    if (name == dtype) return scalar;
  }
  return std::nullopt;
}

std::size_t AlignUp(std::size_t value) {
  return (value + kAlignment - 1) / kAlignment * kAlignment;
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

std::string ShapeText(c10::IntArrayRef shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// A version-2 file whose checksum matches: written completely.
bool IsWhole(std::span<const std::byte> bytes) {
  if (bytes.size() < sizeof kMagic + 2 * sizeof(uint64_t) ||
      std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return false;
  }
  uint64_t hash = 0;
  std::memcpy(&hash, bytes.data() + bytes.size() - sizeof hash, sizeof hash);
  return hash == Fnv1a(bytes.first(bytes.size() - sizeof hash));
}

Result<std::vector<std::byte>> ReadWhole(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return InvalidArgument(path, "cannot be read");
  std::vector<char> chars((std::istreambuf_iterator<char>(file)), {});
  std::vector<std::byte> bytes(chars.size());
  std::memcpy(bytes.data(), chars.data(), chars.size());
  return bytes;
}

}  // namespace

std::vector<std::byte> EncodeCheckpoint(const std::vector<StateTensor>& state, Progress progress,
                                        const nlohmann::json& meta) {
  std::vector<torch::Tensor> dense;
  nlohmann::json tensors = nlohmann::json::array();
  std::size_t offset = 0;
  for (const StateTensor& entry : state) {
    dense.push_back(entry.tensor.detach().to(torch::kCPU).contiguous());  // GPU: copied
    const torch::Tensor& tensor = dense.back();
    tensors.push_back({{"group", entry.group},
                       {"name", entry.name},
                       {"dtype", DtypeName(tensor.scalar_type())},
                       {"shape", tensor.sizes().vec()},
                       {"offset", offset},
                       {"bytes", tensor.nbytes()}});
    offset = AlignUp(offset + tensor.nbytes());
  }
  const std::string header = nlohmann::json{
      {"format", "fulcrum.checkpoint"},
      {"version", 2},
      {"step", progress.step},
      {"cursor", progress.cursor},
      {"equivalent_samples", progress.equivalent_samples},
      {"tensors", std::move(tensors)},
      {"meta", meta}}.dump();
  const std::size_t data_start = AlignUp(sizeof kMagic + sizeof(uint64_t) + header.size());
  std::vector<std::byte> bytes(data_start + offset + sizeof(uint64_t));
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  const uint64_t header_length = header.size();
  std::memcpy(bytes.data() + sizeof kMagic, &header_length, sizeof header_length);
  std::memcpy(bytes.data() + sizeof kMagic + sizeof header_length, header.data(), header.size());
  offset = 0;
  for (const torch::Tensor& tensor : dense) {
    std::memcpy(bytes.data() + data_start + offset, tensor.data_ptr(), tensor.nbytes());
    offset = AlignUp(offset + tensor.nbytes());
  }
  const uint64_t hash = Fnv1a(std::span(bytes).first(bytes.size() - sizeof(uint64_t)));
  std::memcpy(bytes.data() + bytes.size() - sizeof hash, &hash, sizeof hash);
  return bytes;
}

Result<CheckpointContents> DecodeCheckpoint(std::span<const std::byte> bytes,
                                            const std::string& where) {
  if (bytes.size() >= sizeof kVersion1Magic &&
      std::memcmp(bytes.data(), kVersion1Magic, sizeof kVersion1Magic) == 0) {
    return InvalidArgument(where,
                           "is a checkpoint of an older fulcrum-trainer (format 1: tensors without "
                           "names), which this trainer cannot read. Finish the job with the "
                           "trainer image that wrote it, or move the checkpoint files away to "
                           "start again from step 0 (docs/checkpoint-format.md)");
  }
  const std::size_t fixed = sizeof kMagic + 2 * sizeof(uint64_t);
  if (bytes.size() < fixed || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return InvalidArgument(where, "is not a Fulcrum checkpoint (no FULCRUM-CKPT-2 magic)");
  }
  if (!IsWhole(bytes)) {
    return InvalidArgument(where, "is torn or corrupt (its checksum does not match)");
  }
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data() + sizeof kMagic, sizeof header_length);
  if (header_length > kMaxHeaderBytes || fixed + header_length > bytes.size()) {
    return InvalidArgument(where, "has a header length past its end");
  }
  const std::size_t data_start = AlignUp(sizeof kMagic + sizeof(uint64_t) + header_length);
  const std::size_t data_end = bytes.size() - sizeof(uint64_t);
  CheckpointContents contents;
  try {
    const auto header = nlohmann::json::parse(std::string_view(
        reinterpret_cast<const char*>(bytes.data()) + sizeof kMagic + 8, header_length));
    if (header.at("format") != "fulcrum.checkpoint" || header.at("version") != 2) {
      return InvalidArgument(where, "has a header of another format or version");
    }
    contents.progress.step = header.at("step").get<int64_t>();
    contents.progress.cursor = header.at("cursor").get<int64_t>();
    // Written since adaptive batches count progress; an older checkpoint trained every step at
    // efficiency 1, so its equivalent samples are its cursor.
    const auto equivalent = header.find("equivalent_samples");
    contents.progress.equivalent_samples = static_cast<double>(contents.progress.cursor);
    if (equivalent != header.end()) {
      if (!equivalent->is_number() || !std::isfinite(equivalent->get<double>()) ||
          equivalent->get<double>() < 0.0) {
        return InvalidArgument(where, "has equivalent_samples " + equivalent->dump() +
                                          ", which must be a finite number >= 0");
      }
      contents.progress.equivalent_samples = equivalent->get<double>();
    }
    contents.meta = header.value("meta", nlohmann::json::object());
    for (const auto& entry : header.at("tensors")) {
      const std::string name = entry.at("name").get<std::string>();
      const std::optional<torch::ScalarType> dtype = DtypeOf(entry.at("dtype").get<std::string>());
      if (!dtype) return InvalidArgument(where, "tensor " + name + " has an unknown dtype");
      const auto shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offset = entry.at("offset").get<std::size_t>();
      const auto size = entry.at("bytes").get<std::size_t>();
      int64_t elements = 1;
      for (int64_t dimension : shape) {
        if (dimension < 0)
          return InvalidArgument(where, "tensor " + name + " has a negative shape");
        elements *= dimension;
      }
      if (size != static_cast<std::size_t>(elements) * c10::elementSize(*dtype) ||
          offset > data_end - data_start || size > data_end - data_start - offset) {
        return InvalidArgument(where, "tensor " + name + " lies outside the file");
      }
      torch::Tensor tensor = torch::empty(shape, torch::TensorOptions(*dtype));
      std::memcpy(tensor.data_ptr(), bytes.data() + data_start + offset, size);
      contents.tensors.push_back({entry.at("group").get<std::string>(), name, tensor});
    }
  } catch (const nlohmann::json::exception& error) {
    return InvalidArgument(where, std::string("has a malformed header: ") + error.what());
  }
  return contents;
}

Status RestoreTensors(const CheckpointContents& contents, const std::vector<StateTensor>& into,
                      const std::vector<std::string>& groups, const std::string& where) {
  auto wanted = [&](const std::string& group) {
    return std::find(groups.begin(), groups.end(), group) != groups.end();
  };
  std::set<std::pair<std::string, std::string>> expected;
  for (const StateTensor& target : into) expected.insert({target.group, target.name});
  for (const StateTensor& held : contents.tensors) {
    if (wanted(held.group) && !expected.contains({held.group, held.name})) {
      return InvalidArgument(where, "holds " + held.group + " " + held.name +
                                        ", which this model does not have: it was written for "
                                        "another model or optimizer");
    }
  }
  torch::NoGradGuard no_grad;
  for (const StateTensor& target : into) {
    const auto held = std::find_if(
        contents.tensors.begin(), contents.tensors.end(), [&](const StateTensor& candidate) {
          return candidate.group == target.group && candidate.name == target.name;
        });
    if (held == contents.tensors.end()) {
      return InvalidArgument(where,
                             "has no " + target.group + " " + target.name +
                                 ": it was written for another model, optimizer or precision");
    }
    if (held->tensor.sizes() != target.tensor.sizes() ||
        held->tensor.scalar_type() != target.tensor.scalar_type()) {
      return InvalidArgument(where, target.group + " " + target.name + " is " +
                                        DtypeName(held->tensor.scalar_type()) + " " +
                                        ShapeText(held->tensor.sizes()) + " there but " +
                                        DtypeName(target.tensor.scalar_type()) + " " +
                                        ShapeText(target.tensor.sizes()) + " in this model");
    }
    target.tensor.copy_(held->tensor);  // through copy_, so GPU tensors are filled too
  }
  return Ok();
}

Status WriteCheckpoint(const std::string& directory, const std::string& writer, int64_t step,
                       std::span<const std::byte> file_bytes) {
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
  Status status = WriteAll(fd, file_bytes);
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

Result<std::optional<CheckpointFile>> ReadLatestCheckpoint(const std::string& directory) {
  std::error_code error;
  if (!std::filesystem::exists(directory, error)) return std::optional<CheckpointFile>{};
  std::vector<std::pair<int64_t, std::filesystem::path>> all;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (auto found = StepOfCheckpoint(entry.path())) all.emplace_back(*found, entry.path());
  }
  std::sort(all.rbegin(), all.rend());
  for (const auto& [step, path] : all) {
    Result<std::vector<std::byte>> bytes = ReadWhole(path.string());
    if (!bytes.ok()) continue;  // pruned by another rank since the listing
    const bool version1 = bytes->size() >= sizeof kVersion1Magic &&
                          std::memcmp(bytes->data(), kVersion1Magic, sizeof kVersion1Magic) == 0;
    // A torn write (the writer died before its rename was durable): the one before it holds.
    if (!version1 && !IsWhole(*bytes)) continue;
    Result<CheckpointContents> contents = DecodeCheckpoint(*bytes, path.string());
    if (!contents.ok()) return contents.error();
    return std::optional<CheckpointFile>(CheckpointFile{path.string(), std::move(*contents)});
  }
  return std::optional<CheckpointFile>{};
}

Result<CheckpointContents> ReadCheckpoint(const std::string& path) {
  Result<std::vector<std::byte>> bytes = ReadWhole(path);
  if (!bytes.ok()) return bytes.error();
  return DecodeCheckpoint(*bytes, path);
}

}  // namespace fulcrum::trainer
