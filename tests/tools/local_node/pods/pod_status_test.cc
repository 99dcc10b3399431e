#include "tests/tools/local_node/pods/pod_status.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

using State = ContainerView::State;

ContainerView Running(const std::string& name, bool ready = true) {
  ContainerView view;
  view.name = name;
  view.state = State::kRunning;
  view.started_at = "2026-11-22T10:00:00Z";
  view.ready = ready;
  return view;
}

ContainerView Terminated(const std::string& name, int exit_code) {
  ContainerView view;
  view.name = name;
  view.state = State::kTerminated;
  ContainerExit exit;
  exit.exit_code = exit_code;
  exit.reason = exit_code == 0 ? "Completed" : "Error";
  view.terminated = exit;
  return view;
}

ContainerView WaitingToRestart(const std::string& name) {
  ContainerView view = Terminated(name, 1);
  view.state = State::kWaiting;
  view.waiting_reason = "CrashLoopBackOff";
  view.last_termination = view.terminated;
  view.terminated.reset();
  return view;
}

PodView Pod(std::string policy, std::vector<ContainerView> containers) {
  PodView pod;
  pod.restart_policy = std::move(policy);
  pod.containers = std::move(containers);
  pod.sandbox_ready = true;
  return pod;
}

const nlohmann::json& Condition(const nlohmann::json& status, const std::string& type) {
  for (const auto& condition : status["conditions"]) {
    if (condition["type"] == type) return condition;
  }
  static const nlohmann::json none;
  return none;
}

TEST(PodPhase, FollowsKubeletsRules) {
  ContainerView waiting;
  waiting.name = "w";
  EXPECT_EQ(PodPhase(Pod("Always", {waiting})), "Pending");
  EXPECT_EQ(PodPhase(Pod("Never", {Running("a")})), "Running");
  EXPECT_EQ(PodPhase(Pod("Never", {Terminated("a", 0)})), "Succeeded");
  EXPECT_EQ(PodPhase(Pod("Never", {Terminated("a", 3)})), "Failed");
  EXPECT_EQ(PodPhase(Pod("OnFailure", {Terminated("a", 0)})), "Succeeded");
  EXPECT_EQ(PodPhase(Pod("OnFailure", {WaitingToRestart("a")})), "Running");
  EXPECT_EQ(PodPhase(Pod("Always", {Terminated("a", 0)})), "Running");  // about to restart
  EXPECT_EQ(PodPhase(Pod("Never", {Running("a"), Terminated("b", 1)})), "Running");
  EXPECT_EQ(PodPhase(Pod("Never", {Terminated("a", 0), Terminated("b", 1)})), "Failed");
}

TEST(PodPhase, ATerminatingPodEndsSucceededOnlyIfEveryContainerExitedZero) {
  PodView clean = Pod("Always", {Terminated("a", 0)});
  clean.terminal = true;
  EXPECT_EQ(PodPhase(clean), "Succeeded");
  PodView killed = Pod("Always", {Terminated("a", 143)});
  killed.terminal = true;
  EXPECT_EQ(PodPhase(killed), "Failed");
}

TEST(PodPhase, APodTheAgentCannotRunFails) {
  PodView pod = Pod("Always", {Running("a")});
  pod.failure_reason = "FailedMount";
  EXPECT_EQ(PodPhase(pod), "Failed");
}

TEST(PodStatus, ReportsAddressesContainerStatesAndReadiness) {
  PodView pod = Pod("Always", {Running("trainer", /*ready=*/false)});
  pod.pod_ip = "127.77.0.2";
  pod.host_ip = "127.0.0.1";
  const nlohmann::json status =
      BuildPodStatus(pod, nlohmann::json::object(), "2026-11-22T10:00:01Z");
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["podIP"], "127.77.0.2");
  EXPECT_EQ(status["podIPs"][0]["ip"], "127.77.0.2");
  EXPECT_EQ(status["hostIP"], "127.0.0.1");
  EXPECT_EQ(status["startTime"], "2026-11-22T10:00:01Z");
  EXPECT_EQ(status["containerStatuses"][0]["state"]["running"]["startedAt"],
            "2026-11-22T10:00:00Z");
  EXPECT_EQ(status["containerStatuses"][0]["ready"], false);
  EXPECT_EQ(Condition(status, "Ready")["status"], "False");
  EXPECT_EQ(Condition(status, "Ready")["reason"], "ContainersNotReady");
  EXPECT_EQ(Condition(status, "Ready")["message"], "containers with unready status: [trainer]");
  EXPECT_EQ(Condition(status, "PodReadyToStartContainers")["status"], "True");
}

TEST(PodStatus, ATerminatedContainerCarriesExitCodeReasonAndTimes) {
  ContainerView view = Terminated("job", 3);
  view.terminated->started_at = "2026-11-22T10:00:00Z";
  view.terminated->finished_at = "2026-11-22T10:00:05Z";
  view.container_id = "fulcrum-local-node://job-0";
  const nlohmann::json status = BuildPodStatus(Pod("Never", {view}), {}, "2026-11-22T10:00:06Z");
  const nlohmann::json& terminated = status["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_EQ(terminated["exitCode"], 3);
  EXPECT_EQ(terminated["reason"], "Error");
  EXPECT_EQ(terminated["finishedAt"], "2026-11-22T10:00:05Z");
  EXPECT_EQ(terminated["containerID"], "fulcrum-local-node://job-0");
  EXPECT_EQ(Condition(status, "Ready")["reason"], "PodFailed");
}

TEST(PodStatus, ARestartingContainerShowsItsLastTerminationAndRestartCount) {
  ContainerView view = WaitingToRestart("job");
  view.restart_count = 2;
  const nlohmann::json status =
      BuildPodStatus(Pod("OnFailure", {view}), {}, "2026-11-22T10:00:06Z");
  const nlohmann::json& container = status["containerStatuses"][0];
  EXPECT_EQ(container["restartCount"], 2);
  EXPECT_EQ(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
  EXPECT_EQ(container["lastState"]["terminated"]["exitCode"], 1);
}

TEST(PodStatus, ConditionsKeepTheirTransitionTimeUntilTheyFlip) {
  PodView pod = Pod("Always", {Running("a", /*ready=*/true)});
  const nlohmann::json first = BuildPodStatus(pod, {}, "2026-11-22T10:00:00Z");
  const nlohmann::json second = BuildPodStatus(pod, first, "2026-11-22T10:05:00Z");
  EXPECT_EQ(Condition(second, "Ready")["lastTransitionTime"], "2026-11-22T10:00:00Z");
  EXPECT_EQ(second["startTime"], "2026-11-22T10:00:00Z");
  pod.containers[0].ready = false;
  const nlohmann::json third = BuildPodStatus(pod, second, "2026-11-22T10:06:00Z");
  EXPECT_EQ(Condition(third, "Ready")["lastTransitionTime"], "2026-11-22T10:06:00Z");
}

TEST(PodStatus, APodNeverLeavesATerminalPhase) {
  const nlohmann::json previous = {{"phase", "Succeeded"}};
  const nlohmann::json status =
      BuildPodStatus(Pod("Always", {Running("a")}), previous, "2026-11-22T10:00:00Z");
  EXPECT_EQ(status["phase"], "Succeeded");
}

}  // namespace
}  // namespace fulcrum::local_node
