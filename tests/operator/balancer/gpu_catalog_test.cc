// The catalog reads GPU Feature Discovery product labels.
#include "operator/balancer/gpu_catalog.h"

#include <gtest/gtest.h>

namespace fulcrum::balancer {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(LookupGpu, ReadsModelAndMemoryFromAFeatureDiscoveryLabel) {
  const std::optional<GpuProfile> a100 = LookupGpu("NVIDIA-A100-SXM4-40GB");
  ASSERT_TRUE(a100.has_value());
  EXPECT_EQ(a100->model, "A100");
  EXPECT_EQ(a100->memory_bytes, 40 * kGiB);
  EXPECT_GT(a100->relative_speed, 1.0);
}

TEST(LookupGpu, IsCaseInsensitiveAndUsesDefaultMemory) {
  const std::optional<GpuProfile> t4 = LookupGpu("tesla-t4");
  ASSERT_TRUE(t4.has_value());
  EXPECT_EQ(t4->model, "T4");
  EXPECT_EQ(t4->memory_bytes, 16 * kGiB);
  EXPECT_LT(t4->relative_speed, 1.0);
}

TEST(LookupGpu, DoesNotConfuseL4WithL40S) {
  ASSERT_TRUE(LookupGpu("NVIDIA-L40S").has_value());
  EXPECT_EQ(LookupGpu("NVIDIA-L40S")->model, "L40S");
  EXPECT_EQ(LookupGpu("NVIDIA L4")->model, "L4");
}

TEST(LookupGpu, ReturnsNothingForUnknownProducts) {
  EXPECT_FALSE(LookupGpu("Radeon-Pro-W7900").has_value());
  EXPECT_FALSE(LookupGpu("").has_value());
}

TEST(LookupGpu, RanksTheMeasuredProductsAsTheirBenchmarksDo) {
  EXPECT_GT(LookupGpu("A100")->relative_speed, LookupGpu("V100")->relative_speed);
  EXPECT_GT(LookupGpu("V100")->relative_speed, LookupGpu("T4")->relative_speed);
}

}  // namespace
}  // namespace fulcrum::balancer
