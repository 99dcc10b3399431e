// Checkpoint and resume: stop every trainer (SIGTERM), start new ones on the same checkpoint
// directory, and training resumes from the saved step with bit-identical parameters.
#include <gtest/gtest.h>

#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

TEST(TrainerCheckpoint, AStoppedJobResumesFromTheSavedStepWithIdenticalParameters) {
  LocalJob job("checkpoint-resume",
               {"--global-batch", "24", "--min-workers", "2", "--settle-ms", "200"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  const std::string checkpoints = job.directory() + "/checkpoints";
  const std::vector<std::string> args = {"--checkpoint-dir",
                                         checkpoints,
                                         "--checkpoint-every",
                                         "10",
                                         "--emulated-slowdown",
                                         "20",
                                         "--optimizer",
                                         "adam",
                                         "--lr",
                                         "0.01"};
  job.StartTrainer("first-a", args);
  job.StartTrainer("first-b", args);
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("first-a") >= 25; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("first-a"));
  ASSERT_TRUE(job.StopTrainers(std::chrono::seconds(60)));

  // Both wrote the SIGTERM checkpoint of the same step, with the same parameters.
  std::set<std::pair<int64_t, std::string>> saved;
  for (const char* pod : {"first-a", "first-b"}) {
    const auto written = ReadJsonLines(job.trainer_log(pod), "checkpoint written");
    ASSERT_FALSE(written.empty()) << ReadFile(job.trainer_log(pod));
    EXPECT_EQ(written.back()["why"], "SIGTERM");
    saved.emplace(written.back()["step"].get<int64_t>(),
                  written.back()["checksum"].get<std::string>());
  }
  ASSERT_EQ(saved.size(), 1u);
  const auto [saved_step, saved_checksum] = *saved.begin();
  EXPECT_GE(saved_step, 25);

  job.StartTrainer("second-a", args);
  job.StartTrainer("second-b", args);
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("second-a") >= saved_step + 5; },
                        std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("second-a"));
  for (const char* pod : {"second-a", "second-b"}) {
    const auto resumed = ReadJsonLines(job.trainer_log(pod), "resumed from checkpoint");
    ASSERT_EQ(resumed.size(), 1u) << ReadFile(job.trainer_log(pod));
    EXPECT_EQ(resumed.front()["step"], saved_step);
    EXPECT_EQ(resumed.front()["checksum"], saved_checksum);
    const auto synced = ReadJsonLines(job.trainer_log(pod), "state synchronised");
    ASSERT_FALSE(synced.empty());
    EXPECT_EQ(synced.front()["step"], saved_step);
    EXPECT_EQ(synced.front()["checksum"], saved_checksum);
    // The first step after the restart is the saved one: nothing repeated, nothing skipped.
    EXPECT_EQ(ReadJsonLines(job.sample_log(pod)).front()["step"], saved_step);
  }
  EXPECT_TRUE(job.StopTrainers(std::chrono::seconds(60)));
}

}  // namespace
}  // namespace fulcrum::testing
