// Convergence: on the learnable synthetic task, a heterogeneous run (emulated slowdowns 1, 2
// and 4, balanced by the coordinator) ends with the loss of a homogeneous run of the same
// global batch and steps, within 2%. Loss is averaged over the last 10 steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

constexpr int kSteps = 150;

double FinalLoss(const std::string& log) {
  const auto finished = ReadJsonLines(log, "finished");
  return finished.empty() ? NAN : finished.back()["loss"].get<double>();
}

TEST(TrainerConvergence, HeterogeneousRunMatchesHomogeneousLossWithinTwoPercent) {
  const std::vector<std::string> task = {
      "--steps", std::to_string(kSteps), "--model", "mlp", "--lr",
      "0.05",    "--dataset-size",       "2048"};
  LocalJob job("convergence", {"--global-batch", "48", "--min-workers", "3", "--settle-ms", "200"});
  ASSERT_TRUE(job.coordinator_ready());
  const std::map<std::string, std::string> slowdowns = {
      {"fast", "1"}, {"medium", "2"}, {"slow", "4"}};
  for (const auto& [pod, factor] : slowdowns) {
    std::vector<std::string> args = task;
    args.insert(args.end(), {"--emulated-slowdown", factor});
    job.StartTrainer(pod, args);
  }
  std::vector<std::string> homogeneous = {TrainerBinary(),
                                          "--world-size",
                                          "1",
                                          "--rank",
                                          "0",
                                          "--rendezvous",
                                          "127.0.0.1:" + std::to_string(FreeLoopbackPort()),
                                          "--batches",
                                          "48"};
  homogeneous.insert(homogeneous.end(), task.begin(), task.end());
  ChildProcess reference(homogeneous, job.directory() + "/homogeneous.log");
  ASSERT_EQ(reference.Wait(std::chrono::seconds(180)), 0)
      << ReadFile(job.directory() + "/homogeneous.log");
  for (const auto& [pod, factor] : slowdowns) {
    ASSERT_EQ(job.trainer(pod).Wait(std::chrono::seconds(180)), 0)
        << ReadFile(job.trainer_log(pod));
  }
  const double expected = FinalLoss(job.directory() + "/homogeneous.log");
  const double actual = FinalLoss(job.trainer_log("fast"));
  std::cout << "final loss: homogeneous " << expected << ", heterogeneous " << actual << "\n";
  ASSERT_TRUE(std::isfinite(expected) && std::isfinite(actual));
  EXPECT_LT(expected, 2.0) << "the task did not learn (initial loss is ln 10 = 2.30)";
  EXPECT_LE(std::abs(actual - expected), 0.02 * expected);
  // The heterogeneous run really was rebalanced: batches differed across ranks.
  bool unequal = false;
  for (const auto& line : ReadJsonLines(job.sample_log("fast"))) {
    const auto batches = line["batches"].get<std::vector<int>>();
    unequal = unequal || std::adjacent_find(batches.begin(), batches.end(),
                                            std::not_equal_to<>()) != batches.end();
  }
  EXPECT_TRUE(unequal);
}

// A recipe that diverges (SGD at a learning rate of 1e6): once the loss is not finite, every
// rank skips the update, and --max-nonfinite-steps of those in a row end training with exit code
// 3 and an error saying what to change, instead of training on NaNs.
TEST(TrainerConvergence, ADivergingRecipeStopsAfterBoundedSkippedStepsSayingWhy) {
  const std::string directory = FreshDirectory("diverging");
  const int port = FreeLoopbackPort();
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.emplace_back(std::vector<std::string>{TrainerBinary(), "--world-size", "2", "--rank",
                                                std::to_string(rank), "--rendezvous",
                                                "127.0.0.1:" + std::to_string(port), "--batches",
                                                "8,24", "--steps", "500", "--model", "mlp", "--lr",
                                                "1e6", "--max-nonfinite-steps", "3"},
                       directory + "/rank" + std::to_string(rank) + ".log");
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::string log = directory + "/rank" + std::to_string(rank) + ".log";
    EXPECT_EQ(ranks[static_cast<std::size_t>(rank)].Wait(std::chrono::seconds(120)), 3)
        << ReadFile(log);
    const auto diverged = ReadJsonLines(log, "training diverged");
    ASSERT_EQ(diverged.size(), 1u) << ReadFile(log);
    EXPECT_NE(diverged[0]["error"].get<std::string>().find("lower the learning rate"),
              std::string::npos);
    const auto skipped = ReadJsonLines(log, "non-finite loss: the update is skipped on every rank");
    ASSERT_EQ(skipped.size(), 3u) << ReadFile(log);
    EXPECT_EQ(skipped.back()["in_a_row"], 3);
    const auto finished = ReadJsonLines(log, "finished");
    ASSERT_FALSE(finished.empty());
    EXPECT_EQ(finished.back()["why"], "diverged");
    EXPECT_LT(finished.back()["step"].get<int>(), 500);
  }
}

}  // namespace
}  // namespace fulcrum::testing
