// Checkpoint files (docs/checkpoint-format.md): every tensor of the training state with its
// group, name, dtype and shape, the step and data cursor, and free-form metadata, so that
// tools outside Fulcrum (python/fulcrum/checkpoint.py) can read them into a state_dict.
//   16 bytes  magic "FULCRUM-CKPT-2\n\0"
//    8 bytes  little-endian length H of the JSON header
//    H bytes  JSON header; zero padding to a multiple of 64 bytes
//             the tensors' bytes, each at its header offset (from the start of this section)
//    8 bytes  FNV-1a 64 of every byte before it (a torn write is detected and skipped)
// Written atomically (temporary file, fsync, rename); the newest readable one is resumed from.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "trainer_image/trainer/state/training_state.h"

namespace fulcrum::trainer {

// One tensor of the state: group "parameter", "buffer" (state_dict names) or "optimizer"
// ("<slot>/<parameter>", e.g. "exp_avg/fc.weight", or "<slot>" for a global such as "step").
struct StateTensor {
  std::string group;
  std::string name;
  torch::Tensor tensor;
};

struct CheckpointContents {
  Progress progress;
  nlohmann::json meta;
  std::vector<StateTensor> tensors;  // on the CPU
};

std::vector<std::byte> EncodeCheckpoint(const std::vector<StateTensor>& state, Progress progress,
                                        const nlohmann::json& meta);
// `where` (the file) names errors.
Result<CheckpointContents> DecodeCheckpoint(std::span<const std::byte> bytes,
                                            const std::string& where);
// Copies each of `into` from the tensor of the same group and name; every one must be there
// with the same shape and dtype, and the checkpoint must hold nothing else (of `groups`).
Status RestoreTensors(const CheckpointContents& contents, const std::vector<StateTensor>& into,
                      const std::vector<std::string>& groups, const std::string& where);

// Writes checkpoint-<step>.bin into `directory`; `writer` makes the temporary name unique.
Status WriteCheckpoint(const std::string& directory, const std::string& writer, int64_t step,
                       std::span<const std::byte> file_bytes);

struct CheckpointFile {
  std::string path;
  CheckpointContents contents;
};
// The newest checkpoint in `directory` whose bytes are whole (a torn one is skipped for the one
// before it), or nullopt if there is none. A checkpoint in the format before names (version 1)
// is an error saying how to go on.
Result<std::optional<CheckpointFile>> ReadLatestCheckpoint(const std::string& directory);
// One checkpoint file (initFrom): its contents, or an error naming it.
Result<CheckpointContents> ReadCheckpoint(const std::string& path);

}  // namespace fulcrum::trainer
