// The emulated slowdown (EMULATION: tests, demos and benchmarks only): how long it sleeps, and
// that it reads every factor written to its file.
#include "trainer_image/trainer/device/emulated_slowdown.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

namespace fulcrum::trainer {
namespace {

TEST(EmulatedSlowdown, SleepsFactorMinusOneTimesTheCpuTimeTheComputeUsed) {
  // 30 ms of wall time, 20 ms of it computing: the 10 ms waiting for a shared core is not
  // multiplied.
  EXPECT_DOUBLE_EQ(EmulatedSlowdown::SleepSeconds(4.0, 0.030, 0.020), 3.0 * 0.020);
  // Extra threads can use more CPU than wall time: never sleep more than (factor - 1) x wall.
  EXPECT_DOUBLE_EQ(EmulatedSlowdown::SleepSeconds(2.0, 0.010, 0.035), 0.010);
  EXPECT_EQ(EmulatedSlowdown::SleepSeconds(1.0, 0.030, 0.030), 0.0);
  EXPECT_EQ(EmulatedSlowdown::SleepSeconds(3.0, 0.030, -1.0), 0.0);
}

void Write(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(EmulatedSlowdown, AFactorWrittenAfterAReadOfTheTruncatedFileInTheSameMtimeIsApplied) {
  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "emulated_slowdown_truncated";
  Write(path, "2\n");
  EmulatedSlowdown slowdown(1.0, path.string());
  EXPECT_EQ(slowdown.Current("job"), 2.0);
  // A writer's truncate is read before its write lands, and on a coarse file clock both carry
  // one mtime.
  const auto tick = std::filesystem::last_write_time(path) + std::chrono::milliseconds(1);
  Write(path, "");
  std::filesystem::last_write_time(path, tick);
  EXPECT_EQ(slowdown.Current("job"), 2.0);
  Write(path, "12\n");
  std::filesystem::last_write_time(path, tick);
  EXPECT_EQ(slowdown.Current("job"), 12.0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace fulcrum::trainer
