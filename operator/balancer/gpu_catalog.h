// Prior knowledge about GPU products, for the first plan only: measurements replace it within
// a few steps. Speeds are relative training throughput (ResNet-50, mixed precision) with the
// V100 as 1.0; the table in gpu_catalog.cc gives each number's source.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fulcrum::balancer {

struct GpuProfile {
  std::string_view model;  // canonical name, e.g. "A100"
  double relative_speed;   // samples/s relative to a V100
  int64_t memory_bytes;    // from the label's "NNGB" part when present, else the default
  // CUDA compute capability as major*10+minor (V100 70, T4 75, A100 80): which CUDA builds
  // have kernels for it (NVIDIA's CUDA GPUs table).
  int compute_capability;
};

// Looks a product label up the way GPU Feature Discovery writes it ("NVIDIA-A100-SXM4-40GB",
// "Tesla-T4", "NVIDIA L4"); case-insensitive; nullopt for unknown products.
std::optional<GpuProfile> LookupGpu(std::string_view product_label);

}  // namespace fulcrum::balancer
