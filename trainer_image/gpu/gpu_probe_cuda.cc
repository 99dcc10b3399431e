// CUDA build of the GPU probe: links the CUDA runtime and NCCL from the PyPI wheels.
// Nothing runs this on machines without GPUs; CI only proves it compiles and links.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "trainer_image/gpu/gpu_probe.h"

namespace fulcrum::trainer {

GpuProbe ProbeGpus() {
  GpuProbe probe;
  probe.cuda_compiled = true;
  int count = 0;
  if (cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    probe.detail = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(err);
    count = 0;
  }
  probe.device_count = count;
  int version = 0;
  if (ncclGetVersion(&version) == ncclSuccess) probe.nccl_version = version;
  return probe;
}

}  // namespace fulcrum::trainer
