// Reads a trainer checkpoint (docs/checkpoint-format.md) the way an outside tool would: from the
// documented layout, without the trainer's code or torch. Tests compare parameters with it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace fulcrum::testing {

struct CheckpointTensor {
  std::string group;  // parameter, buffer, optimizer
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;                    // raw little-endian values
  std::vector<float> AsFloats() const;  // float32 tensors only (empty otherwise)
};

struct Checkpoint {
  nlohmann::json header;
  std::vector<CheckpointTensor> tensors;
  // Every float32 tensor of `group`, one after another, in file order.
  std::vector<float> Floats(const std::string& group) const;
};

// nullopt when the file is missing, torn or not in format 2.
std::optional<Checkpoint> ReadCheckpointFile(const std::string& path);

}  // namespace fulcrum::testing
