#include "trainer_image/trainer/model/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace fulcrum::trainer {
namespace {

// libtorch 2.x has one device-generic API (its per-device one is deprecated); Debian's 1.13 has
// the per-device one only.
#if TORCH_VERSION_MAJOR >= 2
bool Enabled(c10::DeviceType device) {
  return at::autocast::is_autocast_enabled(device);
}
void SetEnabled(c10::DeviceType device, bool enabled) {
  at::autocast::set_autocast_enabled(device, enabled);
}
c10::ScalarType Dtype(c10::DeviceType device) {
  return at::autocast::get_autocast_dtype(device);
}
void SetDtype(c10::DeviceType device, c10::ScalarType dtype) {
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
bool Enabled(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
}
void SetEnabled(c10::DeviceType device, bool enabled) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
}
c10::ScalarType Dtype(c10::DeviceType device) {
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
}
void SetDtype(c10::DeviceType device, c10::ScalarType dtype) {
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace

AutocastGuard::AutocastGuard(c10::DeviceType device, std::optional<c10::ScalarType> dtype)
    : device_(device) {
  if (!dtype) return;
  active_ = true;
  was_enabled_ = Enabled(device);
  previous_dtype_ = Dtype(device);
  SetDtype(device, *dtype);
  SetEnabled(device, true);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // The cache holds the lower-precision copies of the weights for this forward; they change
  // with every update.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  SetEnabled(device_, was_enabled_);
  SetDtype(device_, previous_dtype_);
}

}  // namespace fulcrum::trainer
