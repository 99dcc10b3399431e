// Everything a trainer must agree on with its peers, as bytes: parameters, buffers, optimizer
// state, step and data cursor. The same bytes are broadcast to newcomers and written as
// checkpoints (atomically: write, fsync, rename).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

struct Progress {
  int64_t step = 0;    // optimizer steps completed
  int64_t cursor = 0;  // next global sample position (see sample_order.h)
};

std::vector<std::byte> PackState(const std::vector<torch::Tensor>& tensors, Progress progress);
// Copies the bytes into `tensors` (same order, shapes and dtypes as packed).
Result<Progress> UnpackState(std::span<const std::byte> bytes,
                             const std::vector<torch::Tensor>& tensors);
std::size_t PackedSize(const std::vector<torch::Tensor>& tensors);

// FNV-1a over the tensors' bytes: equal on every rank iff the parameters are bit-identical.
std::string Checksum(const std::vector<torch::Tensor>& tensors);

// Writes checkpoint-<step>.bin into `directory`; `writer` makes the temporary name unique.
Status WriteCheckpoint(const std::string& directory, const std::string& writer, int64_t step,
                       std::span<const std::byte> state);
// The newest readable checkpoint's bytes, or nullopt if there is none.
Result<std::optional<std::vector<std::byte>>> ReadLatestCheckpoint(const std::string& directory);

}  // namespace fulcrum::trainer
