// Everything a trainer must agree on with its peers, as bytes: parameters, buffers, optimizer
// state, step and data cursor, broadcast to newcomers. Every rank holds the same tensors in the
// same order (checked by size), so no names travel; checkpoints carry them (checkpoint_file.h).
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

struct Progress {
  int64_t step = 0;    // optimizer steps completed
  int64_t cursor = 0;  // next global sample position (see sample_order.h)
  // The samples trained, each weighted by its step's sample efficiency against the job's base
  // batch (Assignment.sample_efficiency): what a job trained for epochs counts its length in.
  // Equal to cursor while every step ran at efficiency 1 (a fixed global batch).
  double equivalent_samples = 0.0;
};

std::vector<std::byte> PackState(const std::vector<torch::Tensor>& tensors, Progress progress);
// Copies the bytes into `tensors` (same order, shapes and dtypes as packed).
Result<Progress> UnpackState(std::span<const std::byte> bytes,
                             const std::vector<torch::Tensor>& tensors);
std::size_t PackedSize(const std::vector<torch::Tensor>& tensors);

// FNV-1a 64 over `bytes`, continuing from `hash`. Why hand-written: a checksum that tells a torn
// write or a diverged rank apart, not a cryptographic one; it is a few lines and needs no library.
uint64_t Fnv1a(std::span<const std::byte> bytes, uint64_t hash = 1469598103934665603ULL);

// FNV-1a over the tensors' bytes: equal on every rank iff the parameters are bit-identical.
std::string Checksum(const std::vector<torch::Tensor>& tensors);

}  // namespace fulcrum::trainer
