// What every pod worker of one agent shares: where things live on disk, how to
// start a shim, where programs come from, the API, and the node-level facts a
// container's environment carries.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "operator/kube/client/api_client.h"
#include "operator/kube/events/event_recorder.h"
#include "tests/tools/local_node/node/slowdown_files.h"
#include "tests/tools/local_node/pods/restart_backoff.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

struct AgentContext {
  std::filesystem::path work_dir;
  std::vector<std::string> shim_command;           // + a state folder
  std::vector<std::filesystem::path> search_dirs;  // --path
  std::string path_variable;                       // the agent's PATH
  std::string host_ip;                             // every node's InternalIP
  // Where in-cluster clients find the API server: its loopback address, since
  // service IPs are not routed here (KUBERNETES_SERVICE_HOST/PORT).
  std::string apiserver_host;
  std::string apiserver_port;
  BackoffPolicy restart_backoff = kKubeletRestartBackoff;
  // The longest an agent that is stopping waits for a container to end after SIGTERM.
  std::chrono::seconds shutdown_grace{5};
  SlowdownFiles slowdown_files{"."};
  std::shared_ptr<kube::ApiClient> client;
  std::shared_ptr<PodReferences> references;
  std::shared_ptr<kube::EventRecorder> events;

  std::filesystem::path PodDir(const std::string& uid) const { return work_dir / "pods" / uid; }
  // kubelet's layout: /var/log/pods/<namespace>_<name>_<uid>/<container>/<restart>.log
  std::filesystem::path LogDir(const std::string& ns, const std::string& name,
                               const std::string& uid) const {
    return work_dir / "logs" / (ns + "_" + name + "_" + uid);
  }
};

}  // namespace fulcrum::local_node
