// Readiness probes, run as kubelet runs them (pkg/kubelet/prober): exec (the
// command in the container's mount namespace, with its environment; exit 0 is
// success), httpGet (a GET to the pod's address; 200-399 is success) and
// tcpSocket (a connection is success), each within timeoutSeconds; a container
// becomes ready after successThreshold successes in a row and unready after
// failureThreshold failures, probed every periodSeconds after initialDelaySeconds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fulcrum::local_node {

struct ProbeContext {
  std::string pod_ip;
  pid_t shim_pid = -1;           // exec probes enter this process's mount namespace
  std::vector<std::string> env;  // "NAME=value", for exec probes
  std::string working_dir;
  nlohmann::json container;  // for named ports
  std::vector<std::filesystem::path> search_dirs;
  std::string path_variable;
};

struct ProbeOutcome {
  bool success = false;
  std::string message;  // why it failed
};

// Runs `probe` (a core/v1 Probe) once; blocks for at most its timeout (plus a little).
ProbeOutcome RunProbe(const nlohmann::json& probe, const ProbeContext& context);

// When to probe next and what the results so far mean for readiness.
class ReadinessSchedule {
 public:
  using Clock = std::chrono::steady_clock;
  ReadinessSchedule(const nlohmann::json& probe, Clock::time_point container_started);
  bool Due(Clock::time_point now) const { return now >= next_; }
  Clock::time_point next() const { return next_; }
  void Record(bool success, Clock::time_point now);
  bool ready() const { return ready_; }

 private:
  std::chrono::seconds period_;
  int success_threshold_;
  int failure_threshold_;
  Clock::time_point next_;
  int successes_ = 0;
  int failures_ = 0;
  bool ready_ = false;
};

}  // namespace fulcrum::local_node
