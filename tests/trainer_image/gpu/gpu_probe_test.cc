#include "trainer_image/gpu/gpu_probe.h"

#include <gtest/gtest.h>

namespace fulcrum::trainer {
namespace {

TEST(GpuProbe, CpuTwinReportsNoDevicesAndSaysWhy) {
  const GpuProbe probe = ProbeGpus();
#ifndef FULCRUM_WITH_CUDA
  EXPECT_FALSE(probe.cuda_compiled);
  EXPECT_EQ(probe.device_count, 0);
  EXPECT_NE(probe.detail.find("FULCRUM_WITH_CUDA=OFF"), std::string::npos);
#else
  EXPECT_TRUE(probe.cuda_compiled);
  // With CUDA compiled in, the probe finds devices or says why it found none, and NCCL answers.
  EXPECT_TRUE(probe.device_count > 0 || !probe.detail.empty()) << probe.device_count;
  EXPECT_GT(probe.nccl_version, 0);
#endif
}

}  // namespace
}  // namespace fulcrum::trainer
