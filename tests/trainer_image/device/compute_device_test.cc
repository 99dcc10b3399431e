// A trainer told --device cuda where it cannot have one fails, naming its node and its image:
// a GPU job never trains on the host's CPUs while holding the node's GPUs.
#include "trainer_image/trainer/device/compute_device.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace fulcrum::trainer {
namespace {

using ::testing::HasSubstr;

TEST(OpenComputeDevice, CudaWithoutAGpuFailsNamingTheNodeAndTheImage) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible here";
  const Result<std::unique_ptr<ComputeDevice>> device =
      OpenComputeDevice(DeviceKind::kCuda, 0, DeviceWhere("a100-node-3", "fulcrum-trainer:0.1"));
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.error().field, "--device");
  EXPECT_THAT(device.error().message, HasSubstr("on node a100-node-3 (image fulcrum-trainer:0.1)"));
}

TEST(OpenComputeDevice, AutoWithoutAGpuTrainsOnTheCpu) {
  if (torch::cuda::is_available()) GTEST_SKIP() << "a GPU is visible here";
  const Result<std::unique_ptr<ComputeDevice>> device = OpenComputeDevice(DeviceKind::kAuto, 0);
  ASSERT_TRUE(device.ok());
  EXPECT_TRUE((*device)->device().is_cpu());
}

TEST(ComputeDevice, DeferredScalarsArriveAsFloat64InTheOrderGiven) {
  // On whichever device this machine trains on (the GPU where there is one): the loss, the norms.
  const Result<std::unique_ptr<ComputeDevice>> device = OpenComputeDevice(DeviceKind::kAuto, 0);
  ASSERT_TRUE(device.ok());
  const torch::Device where = (*device)->device();
  const torch::Tensor loss = torch::full({}, 2.5f, torch::TensorOptions().device(where));
  const torch::Tensor norm =
      torch::full({}, 0.1, torch::TensorOptions(torch::kFloat64).device(where));
  const torch::Tensor on_host = torch::full({}, 7, torch::kInt64);
  const DeferredScalars deferred = (*device)->DeferToHost({loss, norm, on_host});
  EXPECT_EQ((*device)->ReadDeferred(deferred), (std::vector<double>{2.5, 0.1, 7.0}));
  EXPECT_TRUE((*device)->ReadDeferred((*device)->DeferToHost({})).empty());
}

TEST(DeviceWhere, LeavesOutWhatIsNotKnown) {
  EXPECT_EQ(DeviceWhere("n", ""), " on node n");
  EXPECT_EQ(DeviceWhere("", "img"), " (image img)");
  EXPECT_EQ(DeviceWhere("", ""), "");
}

}  // namespace
}  // namespace fulcrum::trainer
