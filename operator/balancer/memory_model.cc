#include "operator/balancer/memory_model.h"

#include <algorithm>
#include <cmath>

namespace fulcrum::balancer {

MemoryModel::MemoryModel(int64_t capacity_bytes, int user_max_batch, double headroom)
    : capacity_bytes_(capacity_bytes), user_max_batch_(user_max_batch), headroom_(headroom) {}

void MemoryModel::ObservePeak(int micro_batch, int64_t peak_bytes) {
  if (micro_batch <= 0 || peak_bytes <= 0) return;
  peaks_.Add(micro_batch, static_cast<double>(peak_bytes), 1.0);
  if (capacity_bytes_ > 0 && peak_bytes <= headroom_ * capacity_bytes_) {
    largest_fitting_batch_ = std::max(largest_fitting_batch_, micro_batch);
  }
}

void MemoryModel::ObserveOutOfMemory(int micro_batch) {
  out_of_memory_cap_ = std::min(out_of_memory_cap_, std::max(0, micro_batch - 1));
}

namespace {

// The largest b with m0 + m1·b <= budget, from the fitted peaks; unlimited without a fit.
int FittedMaxBatch(const WeightedLineFit& peaks, double budget_bytes) {
  const std::optional<Line> line = peaks.Solve();
  if (!line || line->slope <= 0.0) return std::numeric_limits<int>::max();
  const double batches = std::floor((budget_bytes - line->intercept) / line->slope);
  if (batches >= std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  return static_cast<int>(std::max(0.0, batches));
}

}  // namespace

int MemoryModel::MaxBatch() const {
  int cap = std::min(out_of_memory_cap_,
                     user_max_batch_ > 0 ? user_max_batch_ : std::numeric_limits<int>::max());
  if (capacity_bytes_ > 0) {
    // Extrapolating the fit is only trusted above what has already been seen to fit.
    const int fitted = FittedMaxBatch(peaks_, headroom_ * capacity_bytes_);
    cap = std::min(cap, std::max(fitted, largest_fitting_batch_));
  }
  return cap;
}

}  // namespace fulcrum::balancer
