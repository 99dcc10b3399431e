#include "tests/tools/local_node/pods/pod_status.h"

#include "tests/tools/local_node/podspec/json_fields.h"

namespace fulcrum::local_node {
namespace {

nlohmann::json TerminatedJson(const ContainerExit& exit, const std::string& container_id) {
  nlohmann::json json = {{"exitCode", exit.exit_code}, {"reason", exit.reason}};
  if (exit.signal != 0) json["signal"] = exit.signal;
  if (!exit.message.empty()) json["message"] = exit.message;
  if (!exit.started_at.empty()) json["startedAt"] = exit.started_at;
  if (!exit.finished_at.empty()) json["finishedAt"] = exit.finished_at;
  if (!container_id.empty()) json["containerID"] = container_id;
  return json;
}

nlohmann::json ContainerStatusJson(const ContainerView& container) {
  nlohmann::json state;
  switch (container.state) {
    case ContainerView::State::kWaiting: {
      nlohmann::json waiting = {{"reason", container.waiting_reason}};
      if (!container.waiting_message.empty()) waiting["message"] = container.waiting_message;
      state["waiting"] = waiting;
      break;
    }
    case ContainerView::State::kRunning:
      state["running"] = {{"startedAt", container.started_at}};
      break;
    case ContainerView::State::kTerminated:
      state["terminated"] =
          TerminatedJson(container.terminated.value_or(ContainerExit{}), container.container_id);
      break;
  }
  nlohmann::json status = {
      {"name", container.name},
      {"image", container.image},
      {"imageID", ""},
      {"state", state},
      {"lastState", nlohmann::json::object()},
      {"ready", container.ready},
      {"restartCount", container.restart_count},
      {"started", container.state == ContainerView::State::kRunning},
  };
  if (container.last_termination) {
    status["lastState"] = {{"terminated", TerminatedJson(*container.last_termination, "")}};
  }
  if (!container.container_id.empty()) status["containerID"] = container.container_id;
  return status;
}

std::string PreviousTransition(const nlohmann::json& previous, const std::string& type,
                               const std::string& status) {
  for (const auto& condition : ArrayMember(previous, "conditions")) {
    if (StringMember(condition, "type") == type && StringMember(condition, "status") == status) {
      return StringMember(condition, "lastTransitionTime");
    }
  }
  return {};
}

}  // namespace

std::string PodPhase(const PodView& pod) {
  if (!pod.failure_reason.empty()) return "Failed";
  int waiting = 0, running = 0, stopped = 0, succeeded = 0;
  for (const ContainerView& container : pod.containers) {
    switch (container.state) {
      case ContainerView::State::kRunning:
        ++running;
        break;
      case ContainerView::State::kTerminated:
        ++stopped;
        if (container.terminated && container.terminated->exit_code == 0) ++succeeded;
        break;
      case ContainerView::State::kWaiting:
        // Waiting to restart after a termination counts as stopped, as in kubelet.
        if (container.last_termination) {
          ++stopped;
        } else {
          ++waiting;
        }
        break;
    }
  }
  if (waiting > 0 && !pod.terminal) return "Pending";
  if (running > 0) return "Running";
  if (stopped > 0 && waiting == 0) {
    if (pod.terminal) return stopped == succeeded ? "Succeeded" : "Failed";
    if (pod.restart_policy == "Always") return "Running";
    if (stopped == succeeded) return "Succeeded";
    if (pod.restart_policy == "Never") return "Failed";
    return "Running";  // OnFailure: restarting
  }
  if (pod.terminal) return "Failed";  // stopped before every container could start
  return "Pending";
}

nlohmann::json BuildPodStatus(const PodView& pod, const nlohmann::json& previous,
                              const std::string& now) {
  std::string phase = PodPhase(pod);
  const std::string previous_phase = StringMember(previous, "phase");
  if (previous_phase == "Succeeded" || previous_phase == "Failed") phase = previous_phase;
  const bool terminal = phase == "Succeeded" || phase == "Failed";

  std::vector<std::string> unready;
  nlohmann::json container_statuses = nlohmann::json::array();
  for (const ContainerView& container : pod.containers) {
    if (!container.ready) unready.push_back(container.name);
    container_statuses.push_back(ContainerStatusJson(container));
  }
  std::string unready_list;
  for (const auto& name : unready) unready_list += (unready_list.empty() ? "" : " ") + name;

  const auto condition = [&](const std::string& type, bool is_true, const std::string& reason,
                             const std::string& message) {
    const std::string status = is_true ? "True" : "False";
    std::string transition = PreviousTransition(previous, type, status);
    if (transition.empty()) transition = now;
    nlohmann::json json = {{"type", type},
                           {"status", status},
                           {"lastProbeTime", nullptr},
                           {"lastTransitionTime", transition}};
    if (!reason.empty()) json["reason"] = reason;
    if (!message.empty()) json["message"] = message;
    return json;
  };
  const bool all_ready = unready.empty() && !terminal;
  std::string ready_reason, ready_message;
  if (terminal) {
    ready_reason = phase == "Succeeded" ? "PodCompleted" : "PodFailed";
  } else if (!all_ready) {
    ready_reason = "ContainersNotReady";
    ready_message = "containers with unready status: [" + unready_list + "]";
  }
  nlohmann::json conditions = nlohmann::json::array({
      condition("PodReadyToStartContainers", pod.sandbox_ready && !terminal, "", ""),
      condition("Initialized", true, terminal ? (phase == "Succeeded" ? "PodCompleted" : "") : "",
                ""),
      condition("Ready", all_ready, ready_reason, ready_message),
      condition("ContainersReady", all_ready, ready_reason, ready_message),
  });

  nlohmann::json status = {
      {"phase", phase}, {"conditions", conditions}, {"containerStatuses", container_statuses}};
  if (!pod.host_ip.empty()) {
    status["hostIP"] = pod.host_ip;
    status["hostIPs"] = {{{"ip", pod.host_ip}}};
  }
  if (!pod.pod_ip.empty()) {
    status["podIP"] = pod.pod_ip;
    status["podIPs"] = {{{"ip", pod.pod_ip}}};
  }
  const std::string start_time = StringMember(previous, "startTime");
  status["startTime"] = start_time.empty() ? now : start_time;
  if (!pod.failure_reason.empty()) {
    status["reason"] = pod.failure_reason;
    status["message"] = pod.failure_message;
  }
  return status;
}

}  // namespace fulcrum::local_node
