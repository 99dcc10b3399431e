// CPU twin of the GPU probe: built when FULCRUM_WITH_CUDA is off.
#include "trainer_image/gpu/gpu_probe.h"

namespace fulcrum::trainer {

GpuProbe ProbeGpus() {
  GpuProbe probe;
  probe.detail = "built without CUDA (FULCRUM_WITH_CUDA=OFF): training runs on CPU with Gloo";
  return probe;
}

}  // namespace fulcrum::trainer
