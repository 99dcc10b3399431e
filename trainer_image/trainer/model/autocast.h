// Autocast for the forward pass and the loss (mixed precision), as torch.autocast does: ops
// that gain from it run in the lower precision on float32 parameters, and backward runs outside
// it. RAII: the previous state is restored, and the cast cache cleared, when it ends.
#pragma once

#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace fulcrum::trainer {

class AutocastGuard {
 public:
  // `dtype` nullopt: no autocast (float32 training), the guard does nothing.
  AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool active_ = false;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

}  // namespace fulcrum::trainer
