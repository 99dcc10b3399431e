// How forward and backward compute: float32, or mixed precision on float32 parameters.
// Torch-free (the command line fills it).
#pragma once

namespace fulcrum::trainer {

// kBFloat16: forward and the loss under autocast to bfloat16 (no loss scaling needed: its
// range is float32's). kFloat16: autocast to float16 on CUDA with dynamic loss scaling; on a
// CPU (libtorch's CPU autocast has no float16) the loss scaling runs with float32 compute.
enum class Precision { kFloat32, kBFloat16, kFloat16 };

struct PrecisionOptions {
  Precision precision = Precision::kFloat32;
  // kFloat16: the first loss scale, and how many steps in a row without an overflow double it
  // (torch.cuda.amp.GradScaler's defaults). An overflow skips the step on every rank and halves
  // the scale.
  double initial_loss_scale = 65536.0;
  int loss_scale_growth_interval = 2000;
  // Convolution weights and 4-D inputs in the channels_last memory format (NHWC): faster
  // convolutions on tensor cores. The parameters' values and names are unchanged.
  bool channels_last = false;
};

}  // namespace fulcrum::trainer
