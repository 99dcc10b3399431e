#include "operator/controller/job_status.h"

#include <gtest/gtest.h>

namespace fulcrum::controller {
namespace {

coordinator::JobSessionSnapshot Training() {
  coordinator::JobSessionSnapshot training;
  training.membership_generation = 3;
  training.step = 41;
  training.measured_samples_per_second = 900.0;
  training.ideal_samples_per_second = 1000.0;
  training.efficiency = 0.9;
  training.model_calibration = 0.97;
  training.members = {
      {.pod = "w-1",
       .node = "v100",
       .gpu_product = "V100",
       .connected = true,
       .rank = 1,
       .local_batch = 32,
       .last_step = 41,
       .compute_seconds = 0.1,
       .step_seconds = 0.12,
       .samples_per_second = 320.0,
       .fitted_fixed_seconds = 0,
       .fitted_seconds_per_sample = 0},
      {.pod = "w-0",
       .node = "a100",
       .gpu_product = "A100",
       .connected = true,
       .rank = 0,
       .local_batch = 64,
       .last_step = 41,
       .compute_seconds = 0.1,
       .step_seconds = 0.12,
       .samples_per_second = 640.0,
       .fitted_fixed_seconds = 0,
       .fitted_seconds_per_sample = 0},
      {.pod = "spare",
       .node = "t4",
       .gpu_product = "T4",
       .connected = true,
       .rank = -1,
       .local_batch = 0,
       .last_step = -1,
       .compute_seconds = 0,
       .step_seconds = 0,
       .samples_per_second = 0,
       .fitted_fixed_seconds = 0,
       .fitted_seconds_per_sample = 0},
  };
  training.last_rebalance = {.apply_at_step = 30,
                             .reason = "w-1 slowed down",
                             .unix_seconds = 1.7e9,
                             .batches = {64, 32},
                             .predicted_gain = 0.2,
                             .predicted_step_seconds = 0.2,
                             .measured_step_seconds = 0.25,
                             .calibration = 0.8};
  return training;
}

const nlohmann::json* ConditionOf(const nlohmann::json& status, const std::string& type) {
  for (const nlohmann::json& condition : status["conditions"]) {
    if (condition["type"] == type) return &condition;
  }
  return nullptr;
}

TEST(JobStatus, RunningJobShowsWorkersByRankThroughputAndConditions) {
  JobState state{.observed_generation = 2, .created = true, .min_workers = 2};
  const nlohmann::json status = BuildJobStatus(state, Training(), {}, "2026-11-22T20:00:00Z");
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["readyWorkers"], 2);
  EXPECT_EQ(status["step"], 42);
  EXPECT_EQ(status["membershipGeneration"], 3);
  EXPECT_EQ(status["observedGeneration"], 2);
  ASSERT_EQ(status["workers"].size(), 2u);  // the spare holds no rank
  EXPECT_EQ(status["workers"][0]["pod"], "w-0");
  EXPECT_EQ(status["workers"][0]["localBatch"], 64);
  EXPECT_EQ(status["throughput"]["efficiency"], 0.9);
  EXPECT_EQ(status["throughput"]["modelCalibration"], 0.97);
  EXPECT_EQ(status["lastRebalance"]["reason"], "w-1 slowed down");
  EXPECT_EQ(status["lastRebalance"]["time"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(status["lastRebalance"]["predictedStepSeconds"], 0.2);
  EXPECT_EQ(status["lastRebalance"]["measuredStepSeconds"], 0.25);
  EXPECT_EQ(status["lastRebalance"]["calibration"], 0.8);
  EXPECT_EQ((*ConditionOf(status, "Running"))["status"], "True");
  EXPECT_EQ((*ConditionOf(status, "Failed"))["status"], "False");
}

TEST(JobStatus, AWorkerThatMostlyWaitsForDataMakesTheJobDataBoundNamingIt) {
  JobState state{.observed_generation = 2, .created = true, .min_workers = 2};
  coordinator::JobSessionSnapshot training = Training();
  training.members[0].data_wait_seconds = 0.09;  // w-1
  training.members[0].data_wait_fraction = 0.72;
  training.members[1].data_wait_fraction = 0.1;
  const nlohmann::json status = BuildJobStatus(state, training, {}, "2026-11-22T20:00:00Z");
  EXPECT_EQ(status["workers"][1]["pod"], "w-1");
  EXPECT_EQ(status["workers"][1]["dataWaitSeconds"], 0.09);
  EXPECT_EQ(status["workers"][1]["dataWaitFraction"], 0.72);
  const nlohmann::json& bound = *ConditionOf(status, "DataBound");
  EXPECT_EQ(bound["status"], "True");
  EXPECT_EQ(bound["reason"], "WaitingForData");
  EXPECT_NE(bound["message"].get<std::string>().find("worker w-1 waits for its data 72%"),
            std::string::npos)
      << bound["message"];
  EXPECT_TRUE(ConditionIsTrue(status, "DataBound"));

  training.members[0].data_wait_fraction = 0.3;
  const nlohmann::json computing = BuildJobStatus(state, training, status, "2026-11-22T20:01:00Z");
  EXPECT_EQ((*ConditionOf(computing, "DataBound"))["status"], "False");
  EXPECT_EQ((*ConditionOf(computing, "DataBound"))["reason"], "ComputeBound");
  // The condition turning is a change worth writing; the per-step wait figures alone are not.
  EXPECT_TRUE(StatusDiffersBeyondProgress(status, computing));
  training.members[0].data_wait_seconds = 0.01;
  EXPECT_FALSE(StatusDiffersBeyondProgress(
      computing, BuildJobStatus(state, training, computing, "2026-11-22T20:01:00Z")));
}

TEST(JobStatus, PhasesFollowTheControllersDecisions) {
  const auto phase = [](JobState state) {
    state.created = true;
    state.min_workers = 2;
    return BuildJobStatus(state, Training(), {}, "t")["phase"].get<std::string>();
  };
  EXPECT_EQ(phase({.rebalancing = true}), "Rebalancing");
  EXPECT_EQ(phase({.suspended = true}), "Suspended");
  EXPECT_EQ(phase({.succeeded = true}), "Succeeded");
  EXPECT_EQ(phase({.failed_reason = "BackoffLimitExceeded"}), "Failed");
  JobState waiting{.created = true, .min_workers = 3};
  EXPECT_EQ(BuildJobStatus(waiting, Training(), {}, "t")["phase"], "Pending");
}

TEST(JobStatus, ASucceededJobWithAnOutputPathNamesItsModelFiles) {
  JobState state{.created = true, .min_workers = 2, .output_path = "/models/run-1"};
  EXPECT_FALSE(BuildJobStatus(state, Training(), {}, "t").contains("output"));  // not yet
  state.succeeded = true;
  const nlohmann::json status = BuildJobStatus(state, Training(), {}, "t");
  EXPECT_EQ(status["output"]["model"], "/models/run-1/model.pt");
  EXPECT_EQ(status["output"]["metadata"], "/models/run-1/model.json");
  state.output_path.clear();
  EXPECT_FALSE(BuildJobStatus(state, Training(), {}, "t").contains("output"));
}

TEST(JobStatus, TheLastEvaluationAndTrainingLossAppearAndSurviveAFreshCoordinator) {
  const JobState state{.created = true, .min_workers = 2};
  coordinator::JobSessionSnapshot training = Training();
  training.training_loss = 0.25;
  training.last_evaluation = {.step = 40,
                              .loss = 0.5,
                              .accuracy = 0.875,
                              .samples = 512,
                              .seconds = 1.5,
                              .unix_seconds = 1.7e9};
  const nlohmann::json status = BuildJobStatus(state, training, {}, "t");
  EXPECT_EQ(status["trainingLoss"], 0.25);
  EXPECT_EQ(status["lastEvaluation"]["step"], 40);
  EXPECT_EQ(status["lastEvaluation"]["loss"], 0.5);
  EXPECT_EQ(status["lastEvaluation"]["accuracy"], 0.875);
  EXPECT_EQ(status["lastEvaluation"]["samples"], 512);
  EXPECT_EQ(status["lastEvaluation"]["time"], "2023-11-14T22:13:20Z");
  // A coordinator that restarted with the operator knows neither until the trainers report.
  const nlohmann::json later = BuildJobStatus(state, Training(), status, "t");
  EXPECT_EQ(later["lastEvaluation"], status["lastEvaluation"]);
  EXPECT_EQ(later["trainingLoss"], 0.25);
  // No accuracy where the label is not a class.
  training.last_evaluation.accuracy.reset();
  EXPECT_FALSE(BuildJobStatus(state, training, {}, "t")["lastEvaluation"].contains("accuracy"));
}

TEST(JobStatus, AGenerationTheCoordinatorCannotFormIsNamedInTheRunningCondition) {
  JobState state{.created = true, .min_workers = 2};
  coordinator::JobSessionSnapshot training = Training();
  training.formation_error = "Infeasible (workers[].max_batch): no worker can hold a sample";
  training.formation_failures = 4;
  const nlohmann::json status = BuildJobStatus(state, training, {}, "t");
  const nlohmann::json& running = *ConditionOf(status, "Running");
  EXPECT_EQ(running["reason"], "GenerationRetrying");
  EXPECT_EQ(running["message"],
            "cannot form the next membership generation (4 attempts, retrying with back-off): "
            "Infeasible (workers[].max_batch): no worker can hold a sample");
  EXPECT_EQ((*ConditionOf(BuildJobStatus(state, Training(), {}, "t"), "Running"))["reason"],
            "Training");
}

TEST(JobStatus, ConditionsKeepTheirTransitionTimeUntilTheyChange) {
  JobState state{.created = true, .min_workers = 2};
  const nlohmann::json first = BuildJobStatus(state, Training(), {}, "2026-11-22T20:00:00Z");
  const nlohmann::json same = BuildJobStatus(state, Training(), first, "2026-11-22T20:05:00Z");
  EXPECT_EQ((*ConditionOf(same, "Running"))["lastTransitionTime"], "2026-11-22T20:00:00Z");
  state.suspended = true;
  const nlohmann::json suspended = BuildJobStatus(state, Training(), same, "2026-11-22T20:09:00Z");
  EXPECT_EQ((*ConditionOf(suspended, "Suspended"))["lastTransitionTime"], "2026-11-22T20:09:00Z");
  EXPECT_EQ((*ConditionOf(suspended, "Running"))["lastTransitionTime"], "2026-11-22T20:09:00Z");
  EXPECT_EQ((*ConditionOf(suspended, "Created"))["lastTransitionTime"], "2026-11-22T20:00:00Z");
}

TEST(JobStatus, StepNeverGoesBackAndTheLastRebalanceSurvivesAFreshCoordinator) {
  JobState state;
  const nlohmann::json before = BuildJobStatus(state, Training(), {}, "2026-01-01T00:00:00Z");
  EXPECT_EQ(before["lastRebalance"]["predictedGain"], 0.2);
  EXPECT_EQ(before["lastRebalance"]["step"], 30);
  const coordinator::JobSessionSnapshot restarted;  // the operator restarted: nothing known yet
  const nlohmann::json after = BuildJobStatus(state, restarted, before, "2026-01-01T00:01:00Z");
  EXPECT_EQ(after["step"], 42);
  EXPECT_EQ(after["lastRebalance"], before["lastRebalance"]);
}

TEST(JobStatus, ASucceededJobCountsEveryTargetStepEvenIfTheLastReportsWereLost) {
  // The trainers reported step 41 (42 done) and exited 0 at a target of 43 before their last
  // report reached the coordinator.
  JobState state{.created = true, .min_workers = 2, .step_target = 43};
  EXPECT_EQ(BuildJobStatus(state, Training(), {}, "t")["step"], 42);  // running: what was heard
  state.succeeded = true;
  EXPECT_EQ(BuildJobStatus(state, Training(), {}, "t")["step"], 43);
  state.step_target.reset();  // an epochs job without a step count: what was heard
  EXPECT_EQ(BuildJobStatus(state, Training(), {}, "t")["step"], 42);
}

TEST(JobStatus, FailuresAndTimesRoundTripThroughTheStoredStatus) {
  JobState state;
  state.start_time = "2026-01-01T00:00:00Z";
  state.completion_time = "2026-01-01T01:00:00Z";
  state.failures = {{"w-0", "uid-0", "Error", "2026-01-01T00:10:00Z"},
                    {"w-0", "uid-1", "OOMKilled", "2026-01-01T00:20:00Z"}};
  const nlohmann::json status = BuildJobStatus(state, Training(), {}, "2026-01-01T01:00:00Z");
  EXPECT_EQ(status["startTime"], "2026-01-01T00:00:00Z");
  EXPECT_EQ(status["completionTime"], "2026-01-01T01:00:00Z");
  EXPECT_EQ(ReadWorkerFailures(status), state.failures);
  state.released = {{"w-2", "t4", "Tesla-T4", 0.3, "2026-01-01T00:30:00Z"}};
  EXPECT_EQ(ReadReleasedWorkers(BuildJobStatus(state, Training(), {}, "2026-01-01T01:00:00Z")),
            state.released);
  EXPECT_TRUE(ReadWorkerFailures(nlohmann::json::object()).empty());
}

TEST(JobStatus, ProgressAloneIsNotAChangeButABatchOrPhaseIs) {
  JobState state{.created = true, .min_workers = 2};
  coordinator::JobSessionSnapshot training = Training();
  const nlohmann::json before = BuildJobStatus(state, training, {}, "t");
  training.step = 90;
  training.measured_samples_per_second = 950.0;
  training.members[0].samples_per_second = 330.0;
  const nlohmann::json progressed = BuildJobStatus(state, training, before, "t");
  EXPECT_FALSE(StatusDiffersBeyondProgress(before, progressed));
  training.members[0].local_batch = 30;
  EXPECT_TRUE(StatusDiffersBeyondProgress(before, BuildJobStatus(state, training, before, "t")));
  state.suspended = true;
  EXPECT_TRUE(StatusDiffersBeyondProgress(before, BuildJobStatus(state, Training(), before, "t")));
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

// A status as the operator wrote it while the job trained, before a restart.
nlohmann::json TrainingStatus() {
  JobState state;
  state.created = true;
  state.min_workers = 2;
  return BuildJobStatus(state, Training(), nlohmann::json::object(), "2026-11-26T10:00:00Z");
}

TEST(BuildJobStatus, WhileReestablishingTheLastKnownPhaseWorkersAndThroughputStand) {
  const nlohmann::json before = TrainingStatus();
  ASSERT_EQ(before["phase"], "Running");
  JobState state;
  state.created = true;
  state.min_workers = 2;
  state.reestablishing = true;
  // A restarted coordinator: no members, no step yet.
  const nlohmann::json status =
      BuildJobStatus(state, coordinator::JobSessionSnapshot{}, before, "2026-11-26T10:01:00Z");
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["readyWorkers"], 2);
  EXPECT_EQ(status["workers"], before["workers"]);
  EXPECT_EQ(status["throughput"], before["throughput"]);
  EXPECT_EQ(status["membershipGeneration"], 3);
  EXPECT_EQ(status["step"], 42);
  EXPECT_TRUE(ConditionIsTrue(status, "Reestablishing"));
  EXPECT_TRUE(ConditionIsTrue(status, "Running"));
}

TEST(BuildJobStatus, TrainersThatLeftTogetherAfterTheLastStepKeepTheJobRunningUntilPodsEnd) {
  const nlohmann::json before = TrainingStatus();
  ASSERT_EQ(before["phase"], "Running");
  JobState state;
  state.created = true;
  state.min_workers = 2;
  // Every ranked trainer reported step 41 and closed its stream (finished); the pods are not
  // seen Succeeded yet.
  coordinator::JobSessionSnapshot finished = Training();
  for (coordinator::MemberSnapshot& member : finished.members) member.connected = false;
  const nlohmann::json status = BuildJobStatus(state, finished, before, "2026-11-26T10:01:00Z");
  EXPECT_EQ(status["phase"], "Running") << "not Pending between the trainers' end and the pods'";
  EXPECT_EQ(status["readyWorkers"], before["readyWorkers"]);
  // One that fell out before the last step is not finishing: the job is short of workers.
  coordinator::JobSessionSnapshot lost = finished;
  lost.members[0].last_step = 40;
  EXPECT_EQ(BuildJobStatus(state, lost, before, "2026-11-26T10:01:00Z")["phase"], "Pending");
}

TEST(BuildJobStatus, WithoutReestablishingARestartedCoordinatorReadsAsPending) {
  JobState state;
  state.created = true;
  state.min_workers = 2;
  const nlohmann::json status = BuildJobStatus(state, coordinator::JobSessionSnapshot{},
                                               TrainingStatus(), "2026-11-26T10:01:00Z");
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_FALSE(ConditionIsTrue(status, "Reestablishing"));
}

TEST(BuildJobStatus, ASuspendedJobIsNotHeldRunningByReestablishing) {
  JobState state;
  state.created = true;
  state.min_workers = 2;
  state.reestablishing = true;
  state.suspended = true;
  const nlohmann::json status = BuildJobStatus(state, coordinator::JobSessionSnapshot{},
                                               TrainingStatus(), "2026-11-26T10:01:00Z");
  EXPECT_EQ(status["phase"], "Suspended");
  EXPECT_FALSE(ConditionIsTrue(status, "Reestablishing"));
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

TEST(BuildJobStatus, TheSummaryPrintsRatesAsIntegersAndRatiosAsPercentages) {
  JobState state;
  state.created = true;
  state.min_workers = 2;
  coordinator::JobSessionSnapshot training = Training();
  training.measured_samples_per_second = 960.3433732525883;
  training.ideal_samples_per_second = 1100.6;
  training.efficiency = 0.8724228085719674;
  training.training_loss = 0.412345;
  training.last_evaluation.step = 40;
  training.last_evaluation.accuracy = 0.9134;
  const nlohmann::json status =
      BuildJobStatus(state, training, nlohmann::json::object(), "2026-11-26T10:00:00Z");
  EXPECT_EQ(status["summary"], nlohmann::json({{"samplesPerSecond", "960"},
                                               {"idealSamplesPerSecond", "1101"},
                                               {"efficiency", "87%"},
                                               {"loss", "0.4123"},
                                               {"accuracy", "91.3%"}}));
}

TEST(BuildJobStatus, TheSummaryHasNoFiguresBeforeTheyExist) {
  JobState state;
  const nlohmann::json status = BuildJobStatus(state, coordinator::JobSessionSnapshot{},
                                               nlohmann::json::object(), "2026-11-26T10:00:00Z");
  EXPECT_EQ(status["summary"], nlohmann::json::object());
}

}  // namespace
}  // namespace fulcrum::controller
