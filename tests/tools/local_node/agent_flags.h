// fulcrum-local-node's command line, parsed with CLI11 and checked; errors name the flag.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::local_node {

struct AgentFlags {
  std::string kubeconfig;
  std::string nodes_file;
  std::string work_dir = "/tmp/fulcrum-local-node";
  std::vector<std::string> path;  // folders searched first for a container's command
  std::string kubelet_address = "127.0.0.1";
  int kubelet_port = 10250;  // 0: any free port
  std::string tls_cert_file;
  std::string tls_private_key_file;
  std::string client_ca_file;
  std::string pod_ip_range = "127.77.0.0/16";
  double restart_backoff_seconds = 10;
  double max_restart_backoff_seconds = 300;
  int shutdown_grace_seconds = 5;

  bool shim = false;  // internal: run as the shim of one container start
  std::string shim_state_dir;
  bool check_inventory = false;  // only check --nodes and print the node names
};

// `args` without the program name. On --help, returns kFailedPrecondition whose
// message is the help text (print it, exit 0).
Result<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args);

}  // namespace fulcrum::local_node
