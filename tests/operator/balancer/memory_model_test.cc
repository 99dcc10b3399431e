// The memory cap: fitted from reported peaks under 90% of the GPU, lowered at once on OOM.
#include "operator/balancer/memory_model.h"

#include <gtest/gtest.h>

#include <limits>

namespace fulcrum::balancer {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kMiB = int64_t{1} << 20;

TEST(MemoryModel, IsUnlimitedWithoutCapacityCapOrReports) {
  EXPECT_EQ(MemoryModel(0, 0).MaxBatch(), std::numeric_limits<int>::max());
}

TEST(MemoryModel, HonoursTheUserCap) {
  EXPECT_EQ(MemoryModel(16 * kGiB, 64).MaxBatch(), 64);
}

TEST(MemoryModel, FitsPeaksAndKeepsTenPercentHeadroom) {
  // m0 = 1.5 GiB, m1 = 50 MiB per sample, 16 GiB GPU: (0.9·16 GiB − 1.5 GiB) / 50 MiB = 264.
  MemoryModel memory(16 * kGiB, 0);
  for (int batch : {32, 64, 128}) memory.ObservePeak(batch, 1536 * kMiB + batch * 50 * kMiB);
  EXPECT_EQ(memory.MaxBatch(), 264);
}

TEST(MemoryModel, LowersTheCapImmediatelyOnOutOfMemory) {
  MemoryModel memory(16 * kGiB, 0);
  for (int batch : {32, 64, 128}) memory.ObservePeak(batch, 1536 * kMiB + batch * 50 * kMiB);
  memory.ObserveOutOfMemory(200);
  EXPECT_EQ(memory.MaxBatch(), 199);
  memory.ObserveOutOfMemory(250);  // a larger OOM never raises it again
  EXPECT_EQ(memory.MaxBatch(), 199);
}

TEST(MemoryModel, NeverCapsBelowABatchSeenToFit) {
  MemoryModel memory(16 * kGiB, 0);
  // Two noisy peaks whose line would extrapolate too low.
  memory.ObservePeak(100, 10 * kGiB);
  memory.ObservePeak(101, 11 * kGiB);
  EXPECT_GE(memory.MaxBatch(), 101);
}

}  // namespace
}  // namespace fulcrum::balancer
