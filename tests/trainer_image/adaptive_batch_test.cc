// An adaptive global batch with fulcrum-trainer (docs/adaptive-batch.md): the trainers' gradient
// statistics give the coordinator a noise scale, it moves the global batch (here from 16, below
// the job's bounds, into [24, 48] at once) with the learning rate scaled to match, and every rank
// switches both at the same step, without a restart, ending with identical parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// An epoch job counts its length in equivalent samples (docs/adaptive-batch.md): each sample
// weighted by its step's sample efficiency, which the coordinator sends with every new B. A B
// above B0 makes each sample worth less, so the job trains past its epochs' samples until the
// weighted sum covers them, and ends at the first step that does, on every rank at once.
TEST(TrainerAdaptiveBatch, AnEpochJobTrainsUntilItsEquivalentSamplesCoverTheEpochs) {
  constexpr int kDatasetSize = 600;
  constexpr int kEpochs = 2;
  LocalJob job("adaptive-epochs",
               {"--global-batch", "16", "--min-workers", "3", "--settle-ms", "200",
                "--learning-rate", "0.05", "--adaptive-batch-min", "24", "--adaptive-batch-max",
                "48", "--adaptive-batch-dwell-steps", "5"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  for (const char* pod : {"a", "b", "c"}) {
    job.StartTrainer(pod, {"--model", "mlp", "--epochs", std::to_string(kEpochs), "--dataset-size",
                           std::to_string(kDatasetSize), "--lr", "0.05"});
  }
  for (const char* pod : {"a", "b", "c"}) {
    EXPECT_EQ(job.trainer(pod).Wait(std::chrono::seconds(240)), 0)
        << ReadFile(job.trainer_log(pod));
  }
  std::set<double> announced = {1.0};
  for (const auto& change :
       ReadJsonLines(job.directory() + "/coordinator.log", "global batch changed")) {
    announced.insert(change["sample_efficiency"].get<double>());
  }
  ASSERT_GE(announced.size(), 2u) << "the batch never changed";
  std::map<int64_t, int> global_batch;
  std::map<int64_t, std::set<double>> efficiencies;
  for (const char* pod : {"a", "b", "c"}) {
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      global_batch[line["step"]] += static_cast<int>(line["indices"].size());
      efficiencies[line["step"]].insert(line["sample_efficiency"].get<double>());
    }
  }
  ASSERT_FALSE(global_batch.empty());
  double equivalent = 0.0;
  int64_t samples = 0;
  int64_t covered_at = -1;
  bool below_one = false;
  for (const auto& [step, batch] : global_batch) {
    ASSERT_EQ(efficiencies[step].size(), 1u) << "step " << step << ": ranks disagree";
    const double efficiency = *efficiencies[step].begin();
    // The coordinator's log rounds the value it sent.
    EXPECT_TRUE(std::any_of(announced.begin(), announced.end(),
                            [&](double sent) { return std::abs(sent - efficiency) < 1e-9; }))
        << "step " << step << ": " << efficiency;
    below_one = below_one || efficiency < 1.0;
    equivalent += batch * efficiency;
    samples += batch;
    if (covered_at < 0 && equivalent >= kEpochs * kDatasetSize - 0.5) covered_at = step;
  }
  EXPECT_TRUE(below_one) << "B above B0 = 16 makes a sample worth less than one at B0";
  // The job ends at the first step whose equivalent samples cover the epochs, not before.
  EXPECT_EQ(covered_at, global_batch.rbegin()->first);
  EXPECT_GT(samples, kEpochs * kDatasetSize) << "it trained on past the epochs' samples";
  std::set<std::string> checksums;
  for (const char* pod : {"a", "b", "c"}) {
    const auto finished = ReadJsonLines(job.trainer_log(pod), "finished");
    ASSERT_EQ(finished.size(), 1u) << pod;
    EXPECT_EQ(finished.front()["step"].get<int64_t>(), global_batch.rbegin()->first + 1);
    checksums.insert(finished.front()["checksum"].dump());
  }
  EXPECT_EQ(checksums.size(), 1u);
}

}  // namespace
}  // namespace fulcrum::testing
