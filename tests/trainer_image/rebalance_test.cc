// In-place rebalance: when one of 3 trainers slows down (emulated), its local batch shrinks
// while every trainer process keeps running with its PID and the generation stays the same.
// Also scrapes the trainer's Prometheus endpoint.
#include <gtest/gtest.h>

#include <numeric>

#include "tests/support/subprocess.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

// Mean local batch of `pod` over committed steps in [first, last].
double MeanBatch(const LocalJob& job, const std::string& pod, int64_t first, int64_t last) {
  double sum = 0.0;
  int count = 0;
  for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
    const int64_t step = line["step"];
    if (step < first || step > last) continue;
    sum += line["indices"].size();
    ++count;
  }
  return count == 0 ? 0.0 : sum / count;
}

TEST(TrainerRebalance, ASlowerTrainerGetsASmallerBatchWithoutAnyRestart) {
  LocalJob job("rebalance", {"--global-batch", "48", "--min-workers", "3", "--settle-ms", "200"});
  ASSERT_TRUE(job.coordinator_ready()) << ReadFile(job.directory() + "/coordinator.log");
  std::map<std::string, pid_t> pids;
  for (const char* pod : {"a", "b", "c"}) {
    const std::string slowdown_file = job.directory() + "/" + pod + ".slowdown";
    WriteFile(slowdown_file, "20\n");
    std::vector<std::string> args = {"--slowdown-file", slowdown_file, "--hidden", "128"};
    if (std::string(pod) == "a") args.insert(args.end(), {"--metrics-port", "0"});
    pids[pod] = job.StartTrainer(pod, args).pid();
  }
  // Past the dither phase (40 steps) and settled.
  ASSERT_TRUE(WaitUntil([&] { return job.LastStep("b") >= 70; }, std::chrono::seconds(120)))
      << ReadFile(job.trainer_log("b"));
  const int64_t change_step = job.LastStep("b");
  const double before = MeanBatch(job, "b", change_step - 15, change_step);
  WriteFile(job.directory() + "/b.slowdown", "80\n");

  const bool shrank = WaitUntil(
      [&] {
        const int64_t now = job.LastStep("b");
        return now >= change_step + 15 && MeanBatch(job, "b", now - 5, now) < 0.6 * before;
      },
      std::chrono::seconds(120));
  const int64_t observed = job.LastStep("b");
  EXPECT_TRUE(shrank) << "b's batch stayed near " << before << "; coordinator log:\n"
                      << ReadFile(job.directory() + "/coordinator.log");
  std::cout << "b: mean batch " << before << " before the slowdown, "
            << MeanBatch(job, "b", observed - 5, observed) << " at step " << observed
            << " (slowed at step " << change_step << ")\n";

  // In place: same processes, same generation.
  for (const auto& [pod, pid] : pids) {
    EXPECT_TRUE(job.trainer(pod).Running()) << pod;
    const auto started = ReadJsonLines(job.trainer_log(pod), "started");
    ASSERT_EQ(started.size(), 1u) << pod;
    EXPECT_EQ(started.front()["pid"].get<pid_t>(), pid);
    for (const auto& line : ReadJsonLines(job.sample_log(pod))) {
      ASSERT_EQ(line["generation"].get<int64_t>(), 1) << pod << " changed generation";
    }
  }

  // Prometheus metrics of trainer a.
  const int metrics_port = ReadJsonLines(job.trainer_log("a"), "started").front()["metrics_port"];
  const CommandResult scrape =
      RunShell("curl -sf http://127.0.0.1:" + std::to_string(metrics_port) + "/metrics");
  EXPECT_EQ(scrape.exit_code, 0);
  for (const char* metric :
       {"fulcrum_trainer_step_seconds_bucket", "fulcrum_trainer_samples_total",
        "fulcrum_trainer_local_batch", "fulcrum_trainer_loss", "fulcrum_trainer_generation"}) {
    EXPECT_NE(scrape.output.find(metric), std::string::npos) << metric << " missing:\n"
                                                             << scrape.output;
  }
  // promtool (Debian's prometheus package) lints the exposition as Prometheus will read it.
  if (RunShell("command -v promtool").exit_code == 0) {
    const CommandResult linted =
        RunShell("curl -sf http://127.0.0.1:" + std::to_string(metrics_port) +
                 "/metrics | promtool check metrics");
    EXPECT_EQ(linted.exit_code, 0) << linted.output;
  }
  EXPECT_TRUE(job.StopTrainers(std::chrono::seconds(60)));
}

}  // namespace
}  // namespace fulcrum::testing
