// Elastic membership: kill -9 one of 4 trainers mid-run; the other 3 continue in the next
// generation with identical parameters and a step counter that never goes back; a new
// trainer then joins with identical parameters. No survivor restarts.
#include <gtest/gtest.h>

#include <csignal>
#include <optional>
#include <set>
#include <string>

#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

TEST(TrainerElastic, SurvivorsContinueAfterKillNineAndANewcomerJoinsWithTheSameParameters) {
  LocalJob job("elastic", {"--global-batch", "32", "--min-workers", "4", "--settle-ms", "200",
                           "--leave-timeout-ms", "1000"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  const std::vector<std::string> args = {"--emulated-slowdown", "20", "--hidden", "128"};
  const std::vector<std::string> survivors = {"a", "b", "c"};
  for (const char* pod : {"a", "b", "c", "d"}) job.StartTrainer(pod, args);
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("d") >= 20; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("d"));

  const int64_t killed_generation = job.LastGeneration("d");
  const int64_t killed_at = job.LastStep("d");
  job.trainer("d").Signal(SIGKILL);
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const std::string& pod : survivors) {
          if (job.LastGeneration(pod) <= killed_generation || job.LastStep(pod) < killed_at + 10)
            return false;
        }
        return true;
      },
      std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("a")) << ReadFile(job.directory() + "/coordinator.log");

  job.StartTrainer("e", args);
  ASSERT_TRUE(WaitUntil(
      [&] {
        const auto synced = ReadJsonLines(job.trainer_log("e"), "state synchronised");
        return !synced.empty() && job.LastStep("e") >= synced.back()["step"].get<int64_t>() + 5;
      },
      std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("e")) << ReadFile(job.directory() + "/coordinator.log");
  EXPECT_TRUE(job.StopTrainers(std::chrono::seconds(60)));

  // The newcomer received exactly the state the survivors had at that step.
  const auto joined = ReadJsonLines(job.trainer_log("e"), "state synchronised").back();
  bool matched = false;
  for (const auto& line : ReadJsonLines(job.trainer_log("a"), "state synchronised")) {
    if (line["step"] == joined["step"]) {
      EXPECT_EQ(line["checksum"], joined["checksum"]);
      EXPECT_EQ(line["cursor"], joined["cursor"]);
      matched = true;
    }
  }
  EXPECT_TRUE(matched) << "a never synchronised at step " << joined["step"];

  // Everyone still running ends bit-identical at the same step; survivors never restarted.
  std::set<std::string> checksums;
  std::set<int64_t> final_steps;
  for (const char* pod : {"a", "b", "c", "e"}) {
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_EQ(finished.size(), 1u) << pod << ":\n" << ReadFile(job.trainer_log(pod));
    checksums.insert(finished.front()["checksum"].get<std::string>());
    final_steps.insert(finished.front()["step"].get<int64_t>());
    EXPECT_EQ(ReadJsonLines(job.trainer_log(pod), "started").size(), 1u) << pod;
  }
  EXPECT_EQ(checksums.size(), 1u);
  EXPECT_EQ(final_steps.size(), 1u);

  // The step counter never goes back on any survivor.
  for (const std::string& pod : survivors) {
    int64_t previous = -1;
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      const int64_t step = line["step"];
      EXPECT_GT(step, previous) << pod;
      previous = step;
    }
  }
}

// A trainer that hangs (SIGSTOP: it holds its sockets open and answers nothing) would hold
// the others in their all-reduce for the whole collective timeout, here 10 minutes. The
// coordinator finds it silent while its peers speak, forms a generation without it and has
// them abandon the collective; once it runs again it is taken back with the same parameters.
TEST(TrainerElastic, SurvivorsAbandonTheCollectiveOfAHungPeerAndTakeItBackWhenItResumes) {
  LocalJob job("hang", {"--global-batch", "32", "--min-workers", "3", "--settle-ms", "200",
                        "--hang-timeout-ms", "1000"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  const std::vector<std::string> args = {"--collective-timeout-ms", "600000"};
  for (const char* pod : {"a", "b", "c"}) job.StartTrainer(pod, args);
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("c") >= 20; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("c"));

  const int64_t hung_generation = job.LastGeneration("c");
  const int64_t hung_at = job.LastStep("c");
  job.trainer("c").Signal(SIGSTOP);
  auto moved_on = [&](const std::vector<std::string>& pods, int64_t generation, int64_t step) {
    for (const std::string& pod : pods) {
      if (job.LastGeneration(pod) <= generation || job.LastStep(pod) < step) return false;
    }
    return true;
  };
  // Well within the 10-minute collective timeout: only abandoning gets them there.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return moved_on({"a", "b"}, hung_generation, hung_at + 10);
      },
      std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("a")) << ReadFile(job.directory() + "/coordinator.log");
  // The coordinator told the survivors to abandon the collective. Each aborts when its watcher
  // reads that; but one survivor's Abort also fails the other's all-reduce, whose generation
  // may then end (stopping its watcher) before its own copy of the message is read.
  int abandoned = 0;
  for (const char* pod : {"a", "b"}) {
    abandoned += ReadJsonLines(job.trainer_log(pod),
                               "abandoning this generation's collectives: a member hung")
                         .empty()
                     ? 0
                     : 1;
  }
  EXPECT_GE(abandoned, 1) << ReadFile(job.trainer_log("a")) << ReadFile(job.trainer_log("b"));

  const int64_t survivors_generation = job.LastGeneration("a");
  job.trainer("c").Signal(SIGCONT);
  // c wakes up inside an all-reduce whose peers shut their sockets, and on the TCPStore they
  // left: that must fail the step, not the process. A dead c fails here, with its exit status,
  // rather than as a rejoin that never comes.
  auto c_exited = [&] { return !job.trainer("c").Running(); };
  auto exit_status = [&] {
    const std::optional<int> code = job.trainer("c").Wait(std::chrono::milliseconds(0));
    return "c exited with status " + (code ? std::to_string(*code) : std::string("?")) +
           " (128 + n: signal n)\n";
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        return c_exited() || (moved_on({"a", "b", "c"}, survivors_generation, 0) &&
                              job.LastGeneration("c") == job.LastGeneration("a"));
      },
      std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("c")) << ReadFile(job.directory() + "/coordinator.log");
  ASSERT_FALSE(c_exited()) << exit_status() << ReadFile(job.trainer_log("c"));
  const int64_t together_at = job.LastStep("a");
  ASSERT_TRUE(WaitUntil([&] { return c_exited() || job.LastStep("c") >= together_at + 5; },
                        std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("c"));
  ASSERT_FALSE(c_exited()) << exit_status() << ReadFile(job.trainer_log("c"));
  EXPECT_TRUE(job.StopTrainers(std::chrono::seconds(60)));

  std::set<std::string> checksums;
  for (const char* pod : {"a", "b", "c"}) {
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_EQ(finished.size(), 1u) << pod << ":\n" << ReadFile(job.trainer_log(pod));
    checksums.insert(finished.front()["checksum"].get<std::string>());
    EXPECT_EQ(ReadJsonLines(job.trainer_log(pod), "started").size(), 1u) << pod;
  }
  EXPECT_EQ(checksums.size(), 1u);
}

}  // namespace
}  // namespace fulcrum::testing
