// Exactly-once sharding across a rebalance and a membership change, with the loader prefetching
// the next steps' batches: the sample indices the trainers committed are every index exactly
// once in every epoch, and the job ends after exactly --epochs epochs: 16 epochs of 400 samples
// at a global batch of 24 end at position 6,400, the last step taking the 16 samples left.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

constexpr int kDatasetSize = 400;
constexpr int kGlobalBatch = 24;  // 6,400 is not a multiple of it: the last step is partial
constexpr int kEpochs = 16;

TEST(TrainerExactlyOnce, EverySampleOncePerEpochAcrossRebalanceAndJoin) {
  LocalJob job("exactly-once", {"--global-batch", std::to_string(kGlobalBatch), "--min-workers",
                                "2", "--settle-ms", "200"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  // The first two trainers crawl (emulated 100x slower) until the third has committed a step,
  // so the join lands early in the run however slowly this machine starts a process; then
  // they speed up to finish. Every complete epoch of the run is checked below.
  auto args_for = [&](const std::string& pod) {
    const std::string slowdown_file = job.directory() + "/" + pod + ".slowdown";
    WriteFile(slowdown_file, "100\n");
    return std::vector<std::string>{"--dataset-size",  std::to_string(kDatasetSize),
                                    "--epochs",        std::to_string(kEpochs),
                                    "--slowdown-file", slowdown_file};
  };
  job.StartTrainer("a", args_for("a"));
  job.StartTrainer("b", args_for("b"));
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("a") >= 3; }, std::chrono::seconds(60)))
      << ReadFile(job.trainer_log("a"));
  job.StartTrainer("c", args_for("c"));
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("c") >= 1; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("c"));
  // b stays a little slower, so the balancer has a reason to move batches within a generation.
  WriteFile(job.directory() + "/a.slowdown", "2\n");
  WriteFile(job.directory() + "/b.slowdown", "8\n");
  WriteFile(job.directory() + "/c.slowdown", "2\n");
  for (const char* pod : {"a", "b", "c"}) {
    ASSERT_EQ(job.trainer(pod).Wait(std::chrono::seconds(180)), 0)
        << ReadFile(job.trainer_log(pod));
  }

  // position -> index, from every committed step of every trainer.
  std::map<int64_t, int64_t> index_at;
  std::set<int64_t> generations;
  std::map<int64_t, std::set<std::vector<int>>> plans_by_generation;
  for (const char* pod : {"a", "b", "c"}) {
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      const int64_t begin = line["positions"][0];
      const auto indices = line["indices"].get<std::vector<int64_t>>();
      for (std::size_t i = 0; i < indices.size(); ++i) {
        const bool fresh = index_at.emplace(begin + static_cast<int64_t>(i), indices[i]).second;
        ASSERT_TRUE(fresh) << "position " << begin + static_cast<int64_t>(i) << " used twice";
      }
      generations.insert(line["generation"].get<int64_t>());
      plans_by_generation[line["generation"]].insert(line["batches"].get<std::vector<int>>());
    }
  }
  // Nothing past the last epoch, and every epoch complete.
  ASSERT_FALSE(index_at.empty());
  EXPECT_EQ(index_at.rbegin()->first, int64_t{kEpochs} * kDatasetSize - 1);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    std::vector<int> uses(kDatasetSize, 0);
    for (int64_t position = epoch * kDatasetSize; position < (epoch + 1) * kDatasetSize;
         ++position) {
      ASSERT_TRUE(index_at.count(position)) << "position " << position << " never used";
      ++uses[static_cast<std::size_t>(index_at[position])];
    }
    for (int index = 0; index < kDatasetSize; ++index) {
      EXPECT_EQ(uses[static_cast<std::size_t>(index)], 1)
          << "epoch " << epoch << " index " << index;
    }
  }
  // The run really had a membership change and, within a generation, changing batches.
  EXPECT_GE(generations.size(), 2u);
  bool rebalanced = false;
  for (const auto& [generation, plans] : plans_by_generation)
    rebalanced = rebalanced || plans.size() > 1;
  EXPECT_TRUE(rebalanced);
  // The third trainer joined while complete epochs were still running.
  const int64_t join_position = [&] {
    for (const auto& line : ReadJsonLines(job.sample_log("c")))
      return line["positions"][0].get<int64_t>();
    return int64_t{-1};
  }();
  ASSERT_NE(join_position, -1) << "the third trainer never trained a step";
  std::cout << "the third trainer joined at position " << join_position << " of "
            << kEpochs * kDatasetSize << "\n";
  EXPECT_LT(join_position, (kEpochs - 1) * kDatasetSize)
      << "the join came too late to be checked within a complete epoch";
  // Every trainer finished because the epochs were done, and the loader had prefetched batches
  // that a rebalance or the join then made useless (dropped, not trained on).
  int64_t dropped = 0;
  for (const char* pod : {"a", "b", "c"}) {
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_FALSE(finished.empty()) << ReadFile(job.trainer_log(pod));
    EXPECT_EQ(finished.back()["why"], "epochs done");
    dropped += finished.back()["loads_dropped"].get<int64_t>();
  }
  EXPECT_GT(dropped, 0) << "no prefetched batch was ever replaced by a new plan's";
}

}  // namespace
}  // namespace fulcrum::testing
