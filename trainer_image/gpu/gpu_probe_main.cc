// Prints what the GPU probe sees, as one JSON line.
#include <cstdio>

#include "trainer_image/gpu/gpu_probe.h"

int main() {
  const auto probe = fulcrum::trainer::ProbeGpus();
  std::printf("{\"cuda_compiled\":%s,\"device_count\":%d,\"nccl_version\":%d}\n",
              probe.cuda_compiled ? "true" : "false", probe.device_count, probe.nccl_version);
  return 0;
}
