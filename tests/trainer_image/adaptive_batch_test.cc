// An adaptive global batch with fulcrum-trainer (docs/adaptive-batch.md): the trainers' gradient
// statistics give the coordinator a noise scale, it moves the global batch (here from 16, below
// the job's bounds, into [24, 48] at once) with the learning rate scaled to match, and every rank
// switches both at the same step, without a restart, ending with identical parameters.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/support/subprocess.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

TEST(TrainerAdaptiveBatch, TheGlobalBatchAndItsLearningRateChangeOnEveryRankAtTheSameStep) {
  LocalJob job("adaptive", {"--global-batch", "16", "--min-workers", "3", "--settle-ms", "200",
                            "--learning-rate", "0.05", "--adaptive-batch-min", "24",
                            "--adaptive-batch-max", "48", "--adaptive-batch-dwell-steps", "5"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  for (const char* pod : {"a", "b", "c"}) {
    job.StartTrainer(pod, {"--model", "mlp", "--steps", "150", "--lr", "0.05"});
  }
  for (const char* pod : {"a", "b", "c"}) {
    EXPECT_EQ(job.trainer(pod).Wait(std::chrono::seconds(240)), 0)
        << ReadFile(job.trainer_log(pod));
  }
  // Per step: the samples of all ranks (the global batch) and the rate each rank used.
  std::map<int64_t, int> global_batch;
  std::map<int64_t, std::set<double>> rates;
  for (const char* pod : {"a", "b", "c"}) {
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      global_batch[line["step"]] += static_cast<int>(line["indices"].size());
      rates[line["step"]].insert(line["learning_rate"].get<double>());
    }
  }
  ASSERT_EQ(global_batch.size(), 150u);
  EXPECT_EQ(global_batch.begin()->second, 16);
  int64_t changed_at = -1;
  for (const auto& [step, batch] : global_batch) {
    EXPECT_EQ(rates[step].size(), 1u) << "step " << step << ": ranks used different rates";
    if (changed_at < 0 && batch != 16) changed_at = step;
  }
  ASSERT_GE(changed_at, 0) << ReadFile(job.directory() + "/coordinator.log");
  EXPECT_GE(global_batch[changed_at], 24);
  EXPECT_LE(global_batch[changed_at], 48);
  // The rate changed at the same step as the batch: 0.05 before, AdaScale's larger one after.
  EXPECT_DOUBLE_EQ(*rates[changed_at - 1].begin(), 0.05);
  EXPECT_GT(*rates[changed_at].begin(), 0.05);
  // Same processes, identical parameters.
  std::set<std::string> checksums;
  for (const char* pod : {"a", "b", "c"}) {
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_EQ(finished.size(), 1u) << pod;
    EXPECT_EQ(finished.front()["step"].get<int64_t>(), 150);
    checksums.insert(finished.front()["checksum"].dump());
    EXPECT_EQ(ReadJsonLines(job.trainer_log(pod), "started").size(), 1u) << pod;
  }
  EXPECT_EQ(checksums.size(), 1u);
}

}  // namespace
}  // namespace fulcrum::testing
