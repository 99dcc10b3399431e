// What happens to a batch's inputs on the device before forward, declared per job. Torch-free
// (the command line fills it); device_transform.h applies it.
#pragma once

#include <cstdint>
#include <vector>

namespace fulcrum::trainer {

struct TransformOptions {
  // Integer inputs become float32 times scale; 0 picks the default: 1/255 for uint8 (images to
  // [0, 1]) and 1 for other integers. Floating-point inputs become float32 unscaled.
  double scale = 0.0;
  // Per-channel normalisation (channel = dimension 1 of the batch): (x - mean) / std. Empty: none.
  std::vector<double> mean;
  std::vector<double> std;
  // Images [C, H, W]: a random crop of the same size from the image zero-padded by this many
  // pixels on every side (0: none), and a random horizontal flip. Random per (seed, epoch, sample
  // index), so a sample's augmentation does not depend on which worker draws it.
  int crop_padding = 0;
  bool horizontal_flip = false;
  uint64_t seed = 1;
};

}  // namespace fulcrum::trainer
