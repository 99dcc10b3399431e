#include "operator/cmd/fulcrum_operator/operator_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/temporary_directory.h"

namespace fulcrum::operator_main {
namespace {

using coordinator::JobSessionSnapshot;
using coordinator::MemberSnapshot;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// Sample lines (not # HELP / # TYPE) whose labels include `label`, e.g. job="mixed".
int SeriesWith(const std::string& text, const std::string& label) {
  int count = 0;
  for (const std::string& line : Lines(text)) {
    if (!line.starts_with("#") && line.find(label) != std::string::npos) ++count;
  }
  return count;
}

MemberSnapshot Member(std::string pod, std::string gpu, int rank, int local_batch,
                      double step_seconds, double samples_per_second) {
  MemberSnapshot member;
  member.pod = std::move(pod);
  member.gpu_product = std::move(gpu);
  member.connected = true;
  member.rank = rank;
  member.local_batch = local_batch;
  member.step_seconds = step_seconds;
  member.compute_seconds = step_seconds * 0.8;
  member.samples_per_second = samples_per_second;
  return member;
}

// Three ranked workers of different GPUs and one spare waiting for a rank.
JobSessionSnapshot MixedJob() {
  JobSessionSnapshot job;
  job.name = "mixed";
  job.global_batch = 448;
  job.membership_generation = 3;
  job.step = 120;
  job.members = {Member("mixed-worker-0", "NVIDIA-A100-SXM4-40GB", 0, 256, 0.5, 640),
                 Member("mixed-worker-1", "Tesla-V100-SXM2-16GB", 1, 128, 0.5, 320),
                 Member("mixed-worker-2", "Tesla-T4", 2, 64, 0.5, 160),
                 Member("mixed-worker-3", "Tesla-T4", -1, 0, 0, 0)};
  job.measured_samples_per_second = 896;
  job.ideal_samples_per_second = 1024;
  job.efficiency = 0.875;
  job.model_calibration = 0.96;
  job.last_rebalance.calibration = 0.625;
  job.training_loss = 0.5;
  job.last_evaluation = {.step = 100,
                         .loss = 0.75,
                         .accuracy = 0.625,
                         .samples = 1000,
                         .seconds = 2.0,
                         .unix_seconds = 0.0};
  return job;
}

TEST(RebalanceReasonKind, EachOfTheCoordinatorsReasonsHasItsKind) {
  EXPECT_EQ(RebalanceReasonKind("first plan"), "initial");
  EXPECT_EQ(RebalanceReasonKind("joined: mixed-worker-3"), "membership");
  EXPECT_EQ(RebalanceReasonKind("left: mixed-worker-1, mixed-worker-2"), "membership");
  EXPECT_EQ(RebalanceReasonKind("out of memory: mixed-worker-2"), "memory");
  EXPECT_EQ(RebalanceReasonKind("memory cap of mixed-worker-2 fell below its batch"), "memory");
  EXPECT_EQ(RebalanceReasonKind("global batch 448 -> 512"), "global_batch");
  EXPECT_EQ(RebalanceReasonKind("predicted step time 0.5000 s -> 0.4000 s (20.0% gain >= 5.0%)"),
            "speed");
  // A refinement's message mentions the predicted step time too, but not at its start.
  EXPECT_EQ(RebalanceReasonKind("refinement: model error 8.00% -> 3.00%, predicted step time "
                                "0.5000 s -> 0.4950 s (1.0% gain)"),
            "refinement");
  EXPECT_EQ(RebalanceReasonKind("policy proportional -> minmax"), "other");
  EXPECT_EQ(RebalanceReasonKind(""), "other");
}

TEST(RebalanceReasonKind, JoinedReasonsTakeTheFirstKindInPrecedenceOrder) {
  EXPECT_EQ(RebalanceReasonKind("global batch 448 -> 512; out of memory: w-2"), "memory");
  EXPECT_EQ(RebalanceReasonKind("out of memory: w-2; left: w-1"), "membership");
  EXPECT_EQ(RebalanceReasonKind("refinement: x; predicted step time 1 s -> 0.9 s"), "speed");
  EXPECT_EQ(RebalanceReasonKind("first plan; refinement: x"), "refinement");
  EXPECT_EQ(RebalanceReasonKind("policy a -> b; first plan"), "initial");
}

TEST(OperatorMetrics, AJobNotYetEvaluatedHasNaNEvaluationSeries) {
  OperatorMetrics metrics;
  coordinator::JobSessionSnapshot job = MixedJob();
  job.last_evaluation = {};
  metrics.UpdateJob("ml", "mixed", job, {.phase = "Running", .worker_failures = 0});
  const std::vector<std::string> lines = Lines(metrics.Serialize());
  for (const char* line : {R"(fulcrum_job_eval_loss{job="mixed",namespace="ml"} Nan)",
                           R"(fulcrum_job_eval_accuracy{job="mixed",namespace="ml"} Nan)",
                           R"(fulcrum_job_eval_step{job="mixed",namespace="ml"} Nan)"}) {
    EXPECT_THAT(lines, Contains(std::string(line)));
  }
}

TEST(OperatorMetrics, UpdateJobSetsTheJobsAndItsRankedWorkersSeries) {
  OperatorMetrics metrics;
  metrics.UpdateJob("ml", "mixed", MixedJob(), {.phase = "Running", .worker_failures = 2});
  const std::vector<std::string> lines = Lines(metrics.Serialize());
  for (
      const char* line : {
          R"(fulcrum_job_samples_per_second{job="mixed",namespace="ml"} 896)",
          R"(fulcrum_job_ideal_samples_per_second{job="mixed",namespace="ml"} 1024)",
          R"(fulcrum_job_efficiency{job="mixed",namespace="ml"} 0.875)",
          R"(fulcrum_job_model_calibration{job="mixed",namespace="ml"} 0.96)",
          R"(fulcrum_job_plan_calibration{job="mixed",namespace="ml"} 0.625)",
          R"(fulcrum_job_step{job="mixed",namespace="ml"} 120)",
          R"(fulcrum_job_membership_generation{job="mixed",namespace="ml"} 3)",
          R"(fulcrum_job_workers{job="mixed",namespace="ml"} 3)",
          R"(fulcrum_job_training_loss{job="mixed",namespace="ml"} 0.5)",
          R"(fulcrum_job_eval_loss{job="mixed",namespace="ml"} 0.75)",
          R"(fulcrum_job_eval_accuracy{job="mixed",namespace="ml"} 0.625)",
          R"(fulcrum_job_eval_step{job="mixed",namespace="ml"} 100)",
          R"(fulcrum_job_worker_failures{job="mixed",namespace="ml"} 2)",
          R"(fulcrum_job_phase{job="mixed",namespace="ml",phase="Running"} 1)",
          R"(fulcrum_worker_compute_seconds{gpu_product="Tesla-T4",job="mixed",namespace="ml",pod="mixed-worker-2"} 0.4)",
          R"(fulcrum_worker_local_batch{gpu_product="Tesla-T4",job="mixed",namespace="ml",pod="mixed-worker-2"} 64)",
          R"(fulcrum_worker_local_batch{gpu_product="NVIDIA-A100-SXM4-40GB",job="mixed",namespace="ml",pod="mixed-worker-0"} 256)",
          R"(fulcrum_worker_step_seconds{gpu_product="Tesla-V100-SXM2-16GB",job="mixed",namespace="ml",pod="mixed-worker-1"} 0.5)",
          R"(fulcrum_worker_samples_per_second{gpu_product="Tesla-T4",job="mixed",namespace="ml",pod="mixed-worker-2"} 160)",
      }) {
    EXPECT_THAT(lines, Contains(line));
  }
  // The spare holds no rank, so it trains nothing and has no worker series.
  EXPECT_EQ(SeriesWith(metrics.Serialize(), R"(pod="mixed-worker-3")"), 0);
  EXPECT_EQ(SeriesWith(metrics.Serialize(), R"(pod="mixed-worker-)"), 3 * 4);
}

TEST(OperatorMetrics, AWorkerThatLeavesOrChangesGpuLosesItsSeries) {
  OperatorMetrics metrics;
  metrics.UpdateJob("ml", "mixed", MixedJob());
  JobSessionSnapshot after = MixedJob();
  after.members.erase(after.members.begin() + 1);          // mixed-worker-1 left
  after.members[0].gpu_product = "NVIDIA-H100-80GB-HBM3";  // same pod name, rescheduled
  after.members[1].local_batch = 96;
  metrics.UpdateJob("ml", "mixed", after);
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesWith(text, R"(pod="mixed-worker-1")"), 0);
  EXPECT_EQ(SeriesWith(text, R"(gpu_product="NVIDIA-A100-SXM4-40GB")"), 0);
  EXPECT_EQ(SeriesWith(text, R"(gpu_product="NVIDIA-H100-80GB-HBM3")"), 4);
  EXPECT_THAT(
      Lines(text),
      Contains(
          R"(fulcrum_worker_local_batch{gpu_product="Tesla-T4",job="mixed",namespace="ml",pod="mixed-worker-2"} 96)"));
  EXPECT_THAT(Lines(text), Contains(R"(fulcrum_job_workers{job="mixed",namespace="ml"} 2)"));

  // Losing its rank (a spare again, after a generation formed without it) also ends its series.
  after.members[1].rank = -1;
  metrics.UpdateJob("ml", "mixed", after);
  EXPECT_EQ(SeriesWith(metrics.Serialize(), R"(pod="mixed-worker-2")"), 0);
}

TEST(OperatorMetrics, RemoveJobRemovesEveryOneOfItsSeriesAndKeepsOtherJobs) {
  OperatorMetrics metrics;
  JobSessionSnapshot rebalanced = MixedJob();
  rebalanced.plan_changes = 2;
  rebalanced.last_rebalance.reason = "joined: mixed-worker-2";
  metrics.UpdateJob("ml", "mixed", rebalanced, {.phase = "Running"});
  metrics.UpdateJob("ml", "other", rebalanced, {.phase = "Running"});
  metrics.UpdateJob("dev", "mixed", rebalanced, {.phase = "Running"});  // same name elsewhere
  ASSERT_GT(SeriesWith(metrics.Serialize(), R"(job="mixed",namespace="ml")"), 0);
  ASSERT_THAT(metrics.Serialize(),
              HasSubstr(R"(fulcrum_operator_rebalances_total{job="mixed",namespace="ml")"));

  metrics.RemoveJob("ml", "mixed");
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesWith(text, R"(job="mixed",namespace="ml")"), 0);
  // Job gauges, worker failures and phase, three workers' gauges, a rebalance counter per kind.
  const int per_job = 15 + 2 + 3 * 4 + 7;
  EXPECT_EQ(SeriesWith(text, R"(job="other",namespace="ml")"), per_job);
  EXPECT_EQ(SeriesWith(text, R"(job="mixed",namespace="dev")"), per_job);
  metrics.RemoveJob("ml", "mixed");  // again, and of a job never seen: no effect, no crash
  metrics.RemoveJob("ml", "never-seen");
  EXPECT_EQ(metrics.Serialize(), text);
}

TEST(OperatorMetrics, AJobHasOneSeriesForItsCurrentPhase) {
  OperatorMetrics metrics;
  metrics.UpdateJob("ml", "mixed", MixedJob());  // phase not known yet: no series
  EXPECT_EQ(SeriesWith(metrics.Serialize(), "fulcrum_job_phase{"), 0);
  metrics.UpdateJob("ml", "mixed", MixedJob(), {.phase = "Running"});
  metrics.UpdateJob("ml", "mixed", MixedJob(), {.phase = "Succeeded"});
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesWith(text, "fulcrum_job_phase{"), 1);
  EXPECT_THAT(Lines(text),
              Contains(R"(fulcrum_job_phase{job="mixed",namespace="ml",phase="Succeeded"} 1)"));
}

TEST(OperatorMetrics, RemoveAllJobsLeavesOnlyTheOperatorsOwnSeries) {
  OperatorMetrics metrics;
  JobSessionSnapshot job = MixedJob();
  job.plan_changes = 1;
  job.last_rebalance.reason = "first plan";
  metrics.UpdateJob("ml", "mixed", job, {.phase = "Running", .worker_failures = 1});
  metrics.UpdateJob("dev", "other", job, {.phase = "Running"});
  metrics.SetLeader(true);
  metrics.RemoveAllJobs();
  const std::string text = metrics.Serialize();
  EXPECT_EQ(SeriesWith(text, "job=\""), 0) << text;
  EXPECT_THAT(Lines(text), Contains("fulcrum_operator_leader 1"));
  metrics.UpdateJob("ml", "mixed", job);  // leading again: the series come back
  EXPECT_GT(SeriesWith(metrics.Serialize(), R"(job="mixed")"), 0);
}

TEST(OperatorMetrics, RebalancesCountPlanChangesSinceTheLastUpdateUnderTheReasonsKind) {
  OperatorMetrics metrics;
  const std::string initial =
      R"(fulcrum_operator_rebalances_total{job="mixed",namespace="ml",reason="initial"} )";
  const std::string speed =
      R"(fulcrum_operator_rebalances_total{job="mixed",namespace="ml",reason="speed"} )";
  JobSessionSnapshot job = MixedJob();
  // No plan yet: every kind's series at 0, so that Prometheus sees the first of each as an
  // increase (a series born at 1 has none).
  metrics.UpdateJob("ml", "mixed", job);
  for (const char* kind :
       {"initial", "membership", "memory", "global_batch", "speed", "refinement", "other"}) {
    const std::string series =
        R"(fulcrum_operator_rebalances_total{job="mixed",namespace="ml",reason=")" +
        std::string(kind) + R"("} 0)";
    EXPECT_THAT(Lines(metrics.Serialize()), Contains(series));
  }

  job.plan_changes = 1;
  job.last_rebalance.reason = "first plan";
  metrics.UpdateJob("ml", "mixed", job);
  metrics.UpdateJob("ml", "mixed", job);  // unchanged: not counted again
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(initial + "1"));

  job.plan_changes = 4;  // three more since, the last for speed
  job.last_rebalance.reason = "predicted step time 0.5000 s -> 0.4000 s (20.0% gain >= 5.0%)";
  metrics.UpdateJob("ml", "mixed", job);
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(speed + "3"));
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(initial + "1"));

  // A count that went down is a fresh session (the coordinator started the job over): all new.
  job.plan_changes = 1;
  job.last_rebalance.reason = "first plan";
  metrics.UpdateJob("ml", "mixed", job);
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(initial + "2"));

  // A job first seen with plans made (the operator restarted) counts all of them.
  job.plan_changes = 2;
  job.last_rebalance.reason = "left: mixed-worker-1";
  metrics.UpdateJob("ml", "restarted", job);
  EXPECT_THAT(
      Lines(metrics.Serialize()),
      Contains(
          R"(fulcrum_operator_rebalances_total{job="restarted",namespace="ml",reason="membership"} 2)"));
}

TEST(OperatorMetrics, JobsByPhaseZeroesPhasesNoLongerReportedAndAlwaysHasTheKnownOnes) {
  OperatorMetrics metrics;
  for (const char* phase :
       {"Pending", "Running", "Rebalancing", "Suspended", "Succeeded", "Failed"}) {
    EXPECT_THAT(Lines(metrics.Serialize()),
                Contains(std::string(R"(fulcrum_operator_jobs{phase=")") + phase + R"("} 0)"));
  }
  metrics.SetJobsByPhase({{"Running", 3}, {"Failed", 1}, {"Unknown", 2}});
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(R"(fulcrum_operator_jobs{phase="Running"} 3)"));
  EXPECT_THAT(Lines(metrics.Serialize()), Contains(R"(fulcrum_operator_jobs{phase="Unknown"} 2)"));

  metrics.SetJobsByPhase({{"Succeeded", 4}});
  const std::vector<std::string> lines = Lines(metrics.Serialize());
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_jobs{phase="Running"} 0)"));
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_jobs{phase="Failed"} 0)"));
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_jobs{phase="Unknown"} 0)"));
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_jobs{phase="Succeeded"} 4)"));
}

TEST(OperatorMetrics, ReconcileAndQueueObservationsReachTheirSeries) {
  OperatorMetrics metrics;
  metrics.ObserveReconcile(0.004, /*error=*/false);
  metrics.ObserveReconcile(2.0, /*error=*/true);
  metrics.SetQueueDepth(7);
  metrics.ObserveQueueLatency(20.0);
  metrics.ObserveStepDecision(0.0003);
  EXPECT_THAT(Lines(metrics.Serialize()), Contains("fulcrum_operator_leader 0"));
  metrics.SetLeader(true);
  const std::vector<std::string> lines = Lines(metrics.Serialize());
  EXPECT_THAT(lines, Contains("fulcrum_operator_leader 1"));
  EXPECT_THAT(lines, Contains("fulcrum_operator_reconcile_duration_seconds_count 2"));
  EXPECT_THAT(lines,
              Contains(R"(fulcrum_operator_reconcile_duration_seconds_bucket{le="0.005"} 1)"));
  EXPECT_THAT(lines, Contains("fulcrum_operator_reconcile_errors_total 1"));
  EXPECT_THAT(lines, Contains("fulcrum_operator_workqueue_depth 7"));
  // A wait longer than any reconcile still lands in a bucket of its own size.
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_workqueue_latency_seconds_bucket{le="10"} 0)"));
  EXPECT_THAT(lines, Contains(R"(fulcrum_operator_workqueue_latency_seconds_bucket{le="30"} 1)"));
  EXPECT_THAT(lines,
              Contains(R"(fulcrum_coordinator_step_decision_seconds_bucket{le="0.00025"} 0)"));
  EXPECT_THAT(lines,
              Contains(R"(fulcrum_coordinator_step_decision_seconds_bucket{le="0.0005"} 1)"));
}

TEST(OperatorMetrics, PromtoolAcceptsTheExposition) {
  if (fulcrum::testing::RunShell("command -v promtool").exit_code != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus)";
  }
  OperatorMetrics metrics;
  JobSessionSnapshot job = MixedJob();
  job.plan_changes = 1;
  job.last_rebalance.reason = "first plan";
  metrics.UpdateJob("ml", "mixed", job);
  metrics.SetJobsByPhase({{"Running", 1}});
  metrics.ObserveReconcile(0.02, /*error=*/true);
  metrics.ObserveQueueLatency(0.001);
  metrics.ObserveStepDecision(0.001);
  fulcrum::testing::TemporaryDirectory directory("operator-metrics");
  const std::string path = (directory.path() / "metrics.txt").string();
  std::ofstream(path) << metrics.Serialize();
  const fulcrum::testing::CommandResult check =
      fulcrum::testing::RunShell("promtool check metrics < " + fulcrum::testing::ShellQuote(path));
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace fulcrum::operator_main
