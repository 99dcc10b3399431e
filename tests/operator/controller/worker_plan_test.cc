// Which pods a job should have: creation up to the capacity there is, failures counted once
// and replaced after back-off, lost nodes, a lowered max drained in place, completion and
// suspension. Pure: a world in, decisions out.
#include "operator/controller/worker_plan.h"

#include <gtest/gtest.h>

namespace fulcrum::controller {
namespace {

using namespace std::chrono_literals;

const auto kNow = std::chrono::system_clock::time_point() + std::chrono::hours(24 * 365 * 56);

JobSpec Spec(int min, int max) {
  JobSpec spec;
  spec.ns = "ml";
  spec.name = "mixed";
  spec.min_replicas = min;
  spec.max_replicas = max;
  spec.global_batch = 256;
  spec.backoff_limit = 2;
  return spec;
}

WorkerPod Pod(int index, std::string phase, std::string node = "a100") {
  return {.name = "mixed-worker-" + std::to_string(index),
          .uid = "uid-" + std::to_string(index),
          .index = index,
          .phase = ParsePodPhase(phase),
          .node = std::move(node),
          .terminating = false,
          .failure_reason = "",
          .exit_code = 0,
          .termination_message = ""};
}

WorkerWorld World(std::vector<WorkerPod> pods, int free_slots) {
  WorkerWorld world;
  world.pods = std::move(pods);
  world.free_slots = free_slots;
  world.now = kNow;
  return world;
}

std::vector<std::string> Removed(const WorkerDecisions& decisions, RemovalReason reason) {
  std::vector<std::string> pods;
  for (const PodRemoval& removal : decisions.remove) {
    if (removal.reason == reason) pods.push_back(removal.pod);
  }
  return pods;
}

TEST(WorkerPlan, ANewJobGetsAWorkerPerFreeSlotUpToMax) {
  EXPECT_EQ(DecideWorkers(Spec(1, 3), World({}, 2)).create, (std::vector<int>{0, 1}));
  EXPECT_EQ(DecideWorkers(Spec(1, 3), World({}, 9)).create, (std::vector<int>{0, 1, 2}));
}

TEST(WorkerPlan, WithoutCapacityItStillAsksForTheMinimumAndWaits) {
  EXPECT_EQ(DecideWorkers(Spec(2, 4), World({}, 0)).create, (std::vector<int>{0, 1}));
  // Pods waiting for the scheduler already hold the minimum: nothing more.
  EXPECT_TRUE(DecideWorkers(Spec(2, 4), World({Pod(0, "Pending", ""), Pod(1, "Pending", "")}, 0))
                  .create.empty());
}

TEST(WorkerPlan, CapacityThatAppearsGrowsTheJobIntoFreeIndices) {
  const WorkerDecisions decisions =
      DecideWorkers(Spec(1, 4), World({Pod(0, "Running"), Pod(2, "Running")}, 1));
  EXPECT_EQ(decisions.create, std::vector<int>{1});
  EXPECT_TRUE(decisions.remove.empty());
}

TEST(WorkerPlan, OnlyAJobWithFewerWorkersThanMaxSaysItCouldGrow) {
  // Full: free slots would change nothing, so the reconciler need not count them.
  EXPECT_FALSE(
      DecideWorkers(Spec(1, 2), World({Pod(0, "Running"), Pod(1, "Running")}, 0)).could_grow);
  // One short of max: it could grow, and does once free slots are counted.
  const WorkerWorld short_one = World({Pod(0, "Running")}, 0);
  EXPECT_TRUE(DecideWorkers(Spec(1, 2), short_one).could_grow);
  EXPECT_TRUE(DecideWorkers(Spec(1, 2), short_one).create.empty());
  // A worker on a lost node does not stay: the job is short of max again.
  WorkerWorld lost = World({Pod(0, "Running"), Pod(1, "Running", "gone")}, 0);
  lost.nodes["gone"] = NodeHealth::kGone;
  EXPECT_TRUE(DecideWorkers(Spec(1, 2), lost).could_grow);
}

TEST(WorkerPlan, ATerminatingPodStillHoldsItsName) {
  WorkerPod leaving = Pod(0, "Running");
  leaving.terminating = true;
  EXPECT_EQ(DecideWorkers(Spec(1, 2), World({leaving}, 1)).create, std::vector<int>{1});
}

TEST(WorkerPlan, ALoweredMaxDrainsUnscheduledThenHighestIndicesAndKeepsTheRest) {
  const WorkerDecisions decisions = DecideWorkers(
      Spec(1, 2),
      World({Pod(0, "Running"), Pod(1, "Running"), Pod(2, "Running"), Pod(3, "Pending", "")}, 0));
  EXPECT_EQ(Removed(decisions, RemovalReason::kScaledDown),
            (std::vector<std::string>{"mixed-worker-3", "mixed-worker-2"}));
  EXPECT_EQ(decisions.remove.size(), 2u);
  EXPECT_TRUE(decisions.create.empty());
}

TEST(WorkerPlan, AFailedPodIsCountedOnceRemovedAndReplacedAfterBackoff) {
  WorkerPod failed = Pod(1, "Failed");
  failed.failure_reason = "Error (exit code 1)";
  WorkerWorld world = World({Pod(0, "Running"), failed}, 1);
  WorkerDecisions first = DecideWorkers(Spec(1, 2), world);
  ASSERT_EQ(first.new_failures.size(), 1u);
  EXPECT_EQ(first.new_failures[0].uid, "uid-1");
  EXPECT_EQ(first.new_failures[0].reason, "Error (exit code 1)");
  EXPECT_EQ(Removed(first, RemovalReason::kFailed), std::vector<std::string>{"mixed-worker-1"});
  EXPECT_TRUE(first.create.empty()) << "the replacement waits out the back-off";
  ASSERT_TRUE(first.retry_after.has_value());
  EXPECT_EQ(*first.retry_after, ReplacementBackoff(1));

  // The failure is recorded; the cache still shows the pod: it is not counted again.
  world.failures = first.new_failures;
  EXPECT_TRUE(DecideWorkers(Spec(1, 2), world).new_failures.empty());

  // Once the pod is gone and the back-off has passed, a replacement is created.
  world.pods = {Pod(0, "Running")};
  world.now = kNow + ReplacementBackoff(1);
  EXPECT_EQ(DecideWorkers(Spec(1, 2), world).create, std::vector<int>{1});
}

TEST(WorkerPlan, BackoffDoublesFromTenSecondsUpToSixMinutes) {
  EXPECT_EQ(ReplacementBackoff(0), 0ms);
  EXPECT_EQ(ReplacementBackoff(1), 10s);
  EXPECT_EQ(ReplacementBackoff(2), 20s);
  EXPECT_EQ(ReplacementBackoff(4), 80s);
  EXPECT_EQ(ReplacementBackoff(30), 360s);
}

TEST(WorkerPlan, MoreFailuresThanTheBackoffLimitFailTheJobAndStopTheRest) {
  WorkerWorld world = World({Pod(0, "Running"), Pod(1, "Failed")}, 0);
  world.failures = {{"mixed-worker-1", "old-a", "Error", "2026-01-01T00:00:00Z"},
                    {"mixed-worker-1", "old-b", "Error", "2026-01-01T00:01:00Z"}};
  const WorkerDecisions decisions = DecideWorkers(Spec(1, 2), world);
  ASSERT_TRUE(decisions.failed_reason.has_value());
  EXPECT_EQ(*decisions.failed_reason, "BackoffLimitExceeded");
  EXPECT_NE(decisions.failed_message.find("spec.backoffLimit (2)"), std::string::npos);
  EXPECT_EQ(Removed(decisions, RemovalReason::kFinished),
            std::vector<std::string>{"mixed-worker-0"});
  EXPECT_TRUE(decisions.create.empty());
}

TEST(WorkerPlan, ATrainerThatRefusedItsInputOrDivergedFailsTheJobAtOnceWithItsOwnWords) {
  WorkerPod refused = Pod(1, "Failed");
  refused.exit_code = kTrainerInvalidInputExitCode;
  refused.termination_message =
      "{\"level\":\"info\",\"msg\":\"started\"}\n"
      "{\"error\":\"invalid argument (/data/images/label.npy (field label)): sample 4 holds 9, "
      "outside [0, 3) (classes)\",\"level\":\"error\",\"msg\":\"cannot start\"}\n";
  const WorkerDecisions decisions =
      DecideWorkers(Spec(1, 2), World({Pod(0, "Running"), refused}, 0));
  ASSERT_TRUE(decisions.failed_reason.has_value());
  EXPECT_EQ(*decisions.failed_reason, "InvalidInput");
  EXPECT_NE(decisions.failed_message.find("worker mixed-worker-1 refused its input: invalid "
                                          "argument (/data/images/label.npy (field label)): "
                                          "sample 4 holds 9"),
            std::string::npos)
      << decisions.failed_message;
  EXPECT_EQ(Removed(decisions, RemovalReason::kFinished),
            std::vector<std::string>{"mixed-worker-0"});
  EXPECT_TRUE(decisions.create.empty()) << "no replacement: the same input would fail again";

  WorkerPod diverged = Pod(1, "Failed");
  diverged.exit_code = kTrainerDivergedExitCode;
  diverged.termination_message =
      "{\"error\":\"the loss was not finite for 10 steps in a row\",\"msg\":\"training diverged\"}";
  const WorkerDecisions stopped =
      DecideWorkers(Spec(1, 2), World({Pod(0, "Running"), diverged}, 0));
  ASSERT_TRUE(stopped.failed_reason.has_value());
  EXPECT_EQ(*stopped.failed_reason, "Diverged");
  EXPECT_EQ(stopped.failed_message,
            "worker mixed-worker-1: the loss was not finite for 10 steps in a row");

  WorkerPod crashed = Pod(1, "Failed");  // any other exit code is retried after back-off
  crashed.exit_code = 1;
  EXPECT_FALSE(
      DecideWorkers(Spec(1, 2), World({Pod(0, "Running"), crashed}, 0)).failed_reason.has_value());
}

TEST(WorkerPlan, WorkersOnLostNodesAreRemovedForcedOnlyWhenTheNodeIsGone) {
  WorkerWorld world =
      World({Pod(0, "Running", "a100"), Pod(1, "Failed", "v100"), Pod(2, "Running", "t4")}, 0);
  world.nodes = {
      {"a100", NodeHealth::kReady}, {"v100", NodeHealth::kGone}, {"t4", NodeHealth::kNotReady}};
  const WorkerDecisions decisions = DecideWorkers(Spec(1, 3), world);
  ASSERT_EQ(decisions.remove.size(), 2u);
  for (const PodRemoval& removal : decisions.remove) {
    EXPECT_EQ(removal.reason, RemovalReason::kNodeLost);
    EXPECT_EQ(removal.force, removal.pod == "mixed-worker-1") << removal.pod;
  }
  EXPECT_TRUE(decisions.new_failures.empty())
      << "a worker killed with its node is not the job's failure";
}

TEST(WorkerPlan, AWorkerOnANotReadyNodeWhoseTrainerIsConnectedStays) {
  // Across an API server outage every node's lease lapses and the node controller marks them
  // NotReady, while the trainers on them go on training and talking to the coordinator.
  WorkerWorld world = World({Pod(0, "Running", "t4"), Pod(1, "Running", "t4")}, 0);
  world.nodes = {{"t4", NodeHealth::kNotReady}};
  world.connected = {"mixed-worker-0"};
  const WorkerDecisions decisions = DecideWorkers(Spec(1, 2), world);
  EXPECT_EQ(Removed(decisions, RemovalReason::kNodeLost),
            std::vector<std::string>{"mixed-worker-1"})
      << "only the worker whose trainer is not connected counts as lost with its node";

  world.nodes = {{"t4", NodeHealth::kGone}};
  world.connected = {"mixed-worker-0", "mixed-worker-1"};
  EXPECT_EQ(Removed(DecideWorkers(Spec(1, 2), world), RemovalReason::kNodeLost),
            (std::vector<std::string>{"mixed-worker-0", "mixed-worker-1"}))
      << "a deleted node's pods go even while their trainers' streams have not yet dropped";
}

TEST(WorkerPlan, AReleasableWorkerIsRemovedAndNotReplacedBeyondTheCapacityLeft) {
  WorkerWorld world = World({Pod(0, "Running"), Pod(1, "Running"), Pod(2, "Running", "t4")}, 0);
  world.releasable = {"mixed-worker-2"};
  const WorkerDecisions decisions = DecideWorkers(Spec(2, 3), world);
  EXPECT_EQ(Removed(decisions, RemovalReason::kReleased),
            std::vector<std::string>{"mixed-worker-2"});
  EXPECT_EQ(decisions.remove.size(), 1u);
  EXPECT_TRUE(decisions.create.empty()) << "no free slot elsewhere: the job goes on with two";
  EXPECT_TRUE(decisions.new_failures.empty());
}

TEST(WorkerPlan, ATrainerThatFinishedSucceedsTheJob) {
  const WorkerDecisions decisions =
      DecideWorkers(Spec(1, 2), World({Pod(0, "Succeeded"), Pod(1, "Running")}, 3));
  EXPECT_TRUE(decisions.succeeded);
  EXPECT_TRUE(decisions.create.empty());
  EXPECT_TRUE(decisions.remove.empty()) << "the others finish the last step too; their pods stay";
}

TEST(WorkerPlan, SuspensionCreatesNothingRemovesIdlePodsAndLeavesRunningOnesToStop) {
  JobSpec spec = Spec(1, 3);
  spec.suspend = true;
  const WorkerDecisions decisions = DecideWorkers(
      spec, World({Pod(0, "Running"), Pod(1, "Pending", ""), Pod(2, "Succeeded")}, 5));
  EXPECT_TRUE(decisions.create.empty());
  EXPECT_FALSE(decisions.succeeded) << "a trainer that exited on STOP did not finish training";
  EXPECT_EQ(Removed(decisions, RemovalReason::kFinished),
            (std::vector<std::string>{"mixed-worker-2", "mixed-worker-1"}));
}

TEST(WorkerPlan, PodsStoppedBySuspendAreRemovedNotCountedAsSuccessOnResume) {
  WorkerWorld world = World({Pod(0, "Succeeded")}, 1);
  world.was_suspended = true;
  const WorkerDecisions decisions = DecideWorkers(Spec(1, 2), world);
  EXPECT_FALSE(decisions.succeeded);
  EXPECT_EQ(Removed(decisions, RemovalReason::kFinished),
            std::vector<std::string>{"mixed-worker-0"});
}

}  // namespace
}  // namespace fulcrum::controller
