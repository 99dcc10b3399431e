// A pod's status as kubelet reports it (pkg/kubelet/kubelet_pods.go getPhase and
// generateAPIPodStatus, pkg/kubelet/status/generate.go), computed from what the
// agent knows of its containers. Pure: the agent supplies the facts and the time.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tests/tools/local_node/runtime/container_exit.h"

namespace fulcrum::local_node {

struct ContainerView {
  enum class State { kWaiting, kRunning, kTerminated };
  std::string name;
  std::string image;
  State state = State::kWaiting;
  std::string waiting_reason = "ContainerCreating";  // kWaiting
  std::string waiting_message;
  std::string started_at;                   // kRunning
  std::optional<ContainerExit> terminated;  // kTerminated
  std::optional<ContainerExit> last_termination;
  int restart_count = 0;
  bool ready = false;
  std::string container_id;  // "fulcrum-local-node://..." once it ran
};

struct PodView {
  std::string restart_policy = "Always";  // Always | OnFailure | Never
  std::vector<ContainerView> containers;
  std::string pod_ip;
  std::string host_ip;
  bool sandbox_ready = false;  // volumes and address in place (PodReadyToStartContainers)
  bool terminal =
      false;  // the pod is being stopped for good (deleted, node lost): no restarts follow
  // A pod the agent cannot run at all (an unsupported volume): phase Failed with these.
  std::string failure_reason;
  std::string failure_message;
};

// Kubelet's getPhase: Pending, Running, Succeeded or Failed.
std::string PodPhase(const PodView& pod);

// The status to write. `previous` is the status the API holds (conditions keep
// their lastTransitionTime unless their status flips; startTime is set once);
// `now` is an RFC 3339 time. A pod whose previous phase is Succeeded or Failed
// keeps that phase: a pod never leaves a terminal phase.
nlohmann::json BuildPodStatus(const PodView& pod, const nlohmann::json& previous,
                              const std::string& now);

}  // namespace fulcrum::local_node
