#include "operator/balancer/gpu_catalog.h"

#include <array>
#include <cctype>
#include <charconv>
#include <string>
#include <vector>

namespace fulcrum::balancer {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

// Measured: NVIDIA DeepLearningExamples, PyTorch ResNet50 v1.5 README, training, 1 GPU, AMP:
// A100 80GB 2470 img/s, V100 16GB 1200 img/s. T4: V100 × 1198/3382, the T4/V100 ratio of
// the same README's mixed-precision inference throughput at batch 256.
// Estimated (no public like-for-like training number found): V100 × min(peak FP16 tensor
// TFLOPS ratio, memory bandwidth ratio) from NVIDIA datasheets; the same rule gives 2.27 for
// the A100 (measured 2.06) and 0.36 for the T4 (derived 0.35).
struct CatalogEntry {
  std::string_view model;
  double relative_speed;
  int64_t default_memory_bytes;
  int compute_capability;  // NVIDIA's CUDA GPUs table (developer.nvidia.com/cuda-gpus)
};
constexpr std::array kCatalog = {
    CatalogEntry{"H100", 3.72, 80 * kGiB, 90},  // estimated: 3350/900 GB/s
    CatalogEntry{"A100", 2.06, 80 * kGiB, 80},  // measured
    CatalogEntry{"A30", 1.04, 24 * kGiB, 80},   // estimated: 933/900 GB/s
    CatalogEntry{"V100", 1.00, 16 * kGiB, 70},  // measured (reference)
    CatalogEntry{"L40S", 0.96, 48 * kGiB, 89},  // estimated: 864/900 GB/s
    CatalogEntry{"A40", 0.77, 48 * kGiB, 86},   // estimated: 696/900 GB/s
    CatalogEntry{"A10", 0.67, 24 * kGiB, 86},   // estimated: 600/900 GB/s
    CatalogEntry{"A10G", 0.67, 24 * kGiB, 86},  // estimated: 600/900 GB/s
    CatalogEntry{"T4", 0.354, 16 * kGiB, 75},   // derived from inference ratio
    CatalogEntry{"L4", 0.33, 24 * kGiB, 89},    // estimated: 300/900 GB/s
    CatalogEntry{"P100", 0.15, 16 * kGiB, 60},  // estimated: 18.7/125 FP16 TFLOPS, no tensor cores
};

std::vector<std::string> UpperCaseTokens(std::string_view label) {
  std::vector<std::string> tokens(1);
  for (char c : label) {
    if (c == '-' || c == '_' || c == ' ') {
      if (!tokens.back().empty()) tokens.emplace_back();
    } else {
      tokens.back().push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
  }
  return tokens;
}

// "80GB" -> 80 GiB; nullopt for any other token.
std::optional<int64_t> MemoryFromToken(const std::string& token) {
  if (token.size() < 3 || token.substr(token.size() - 2) != "GB") return std::nullopt;
  int gigabytes = 0;
  const char* end = token.data() + token.size() - 2;
  const auto [parsed_to, error] = std::from_chars(token.data(), end, gigabytes);
  if (error != std::errc{} || parsed_to != end || gigabytes <= 0) return std::nullopt;
  return gigabytes * kGiB;
}

}  // namespace

std::optional<GpuProfile> LookupGpu(std::string_view product_label) {
  const std::vector<std::string> tokens = UpperCaseTokens(product_label);
  for (const CatalogEntry& entry : kCatalog) {
    for (const std::string& token : tokens) {
      if (token != entry.model) continue;
      GpuProfile profile{entry.model, entry.relative_speed, entry.default_memory_bytes,
                         entry.compute_capability};
      for (const std::string& other : tokens) {
        if (std::optional<int64_t> memory = MemoryFromToken(other)) profile.memory_bytes = *memory;
      }
      return profile;
    }
  }
  return std::nullopt;
}

}  // namespace fulcrum::balancer
