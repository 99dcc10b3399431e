// A coordinator restart does not stop training: trainers keep training on their last
// assignment, reconnect, and the new coordinator forms a generation numbered above theirs;
// no trainer restarts and all end bit-identical.
#include <gtest/gtest.h>

#include <set>

#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

TEST(TrainerCoordinatorRestart, TrainingContinuesAcrossACoordinatorRestart) {
  LocalJob job("coordinator-restart",
               {"--global-batch", "24", "--min-workers", "2", "--settle-ms", "200"});
  ASSERT_TRUE(job.coordinator_ready());
  const std::vector<std::string> args = {"--emulated-slowdown", "20"};
  job.StartTrainer("a", args);
  job.StartTrainer("b", args);
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("a") >= 15; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("a"));
  const int64_t generation_before = job.LastGeneration("a");
  const int64_t step_before = job.LastStep("a");
  ASSERT_TRUE(job.RestartCoordinator()) << ReadFile(job.directory() + "/coordinator.log");

  ASSERT_TRUE(WaitUntil(
      [&] {
        return job.LastGeneration("a") > generation_before &&
               job.LastGeneration("b") > generation_before && job.LastStep("a") >= step_before + 15;
      },
      std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("a")) << ReadFile(job.directory() + "/coordinator.log");
  EXPECT_TRUE(job.StopTrainers(std::chrono::seconds(60)));

  std::set<std::string> checksums;
  for (const char* pod : {"a", "b"}) {
    EXPECT_EQ(ReadJsonLines(job.trainer_log(pod), "started").size(), 1u) << pod;
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_EQ(finished.size(), 1u) << ReadFile(job.trainer_log(pod));
    checksums.insert(finished.front()["checksum"].get<std::string>());
    int64_t previous = -1;
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      EXPECT_GT(line["step"].get<int64_t>(), previous) << pod;
      previous = line["step"];
    }
  }
  EXPECT_EQ(checksums.size(), 1u);
}

}  // namespace
}  // namespace fulcrum::testing
