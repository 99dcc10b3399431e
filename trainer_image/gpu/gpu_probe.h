// What accelerators this process can use. The CUDA build asks the CUDA runtime
// and NCCL; the CPU twin (the default build, and every test machine) reports none.
#pragma once

#include <string>

namespace fulcrum::trainer {

struct GpuProbe {
  bool cuda_compiled = false;  // built with FULCRUM_WITH_CUDA
  int device_count = 0;        // CUDA devices visible to this process
  int nccl_version = 0;        // ncclGetVersion(), 0 when NCCL is absent
  std::string detail;          // why no device was found, for logs
};

GpuProbe ProbeGpus();

}  // namespace fulcrum::trainer
