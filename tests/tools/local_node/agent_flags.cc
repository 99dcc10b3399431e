#include "tests/tools/local_node/agent_flags.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>

#include "common/command_line.h"

namespace fulcrum::local_node {
namespace {

Status RequireFile(const std::string& flag, const std::string& path, const std::string& what) {
  std::error_code error;
  if (path.empty()) return InvalidArgument(flag, "is required: " + what);
  if (!std::filesystem::is_regular_file(path, error)) {
    return InvalidArgument(flag, "'" + path + "' is not a readable file (" + what + ")");
  }
  return Ok();
}

}  // namespace

Result<AgentFlags> ParseAgentFlags(const std::vector<std::string>& args) {
  AgentFlags flags;
  CLI::App app{
      "fulcrum-local-node: a kubelet for emulated GPU nodes. Registers the nodes of an inventory, "
      "keeps them\n"
      "alive, and runs the pods bound to them as local processes (no containers: each pod gets its "
      "own\n"
      "loopback address and mount namespace). Emulation for tests and demos; see "
      "docs/local-node.md.\n"
      "`fulcrum-local-node check-inventory FILE` checks an inventory and prints its node names.",
      "fulcrum-local-node"};
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig of an identity that may write nodes, leases, pods")
      ->required();
  app.add_option("--nodes", flags.nodes_file,
                 "node inventory (tests/cluster/nodes/local-mixed.yaml format)")
      ->required();
  app.add_option("--work-dir", flags.work_dir, "pods' files, logs and state; kept across restarts")
      ->capture_default_str();
  app.add_option("--path", flags.path,
                 "folder searched first for a container's command (repeatable)");
  app.add_option("--kubelet-address", flags.kubelet_address,
                 "InternalIP of the nodes; the log server listens here")
      ->capture_default_str();
  app.add_option("--kubelet-port", flags.kubelet_port, "the log server's port (0: any free port)")
      ->capture_default_str();
  app.add_option("--tls-cert-file", flags.tls_cert_file,
                 "serving certificate of the log server (PEM)");
  app.add_option("--tls-private-key-file", flags.tls_private_key_file, "its key (PEM)");
  app.add_option("--client-ca-file", flags.client_ca_file,
                 "CA of the API server's --kubelet-client-certificate; other clients are refused");
  app.add_option("--pod-ip-range", flags.pod_ip_range, "loopback range pods get addresses from")
      ->capture_default_str();
  app.add_option("--restart-backoff", flags.restart_backoff_seconds,
                 "first crash-loop back-off, seconds")
      ->capture_default_str();
  app.add_option("--max-restart-backoff", flags.max_restart_backoff_seconds,
                 "longest crash-loop back-off, seconds")
      ->capture_default_str();
  app.add_option("--shutdown-grace", flags.shutdown_grace_seconds,
                 "on SIGTERM, how long containers get to stop before SIGKILL, seconds")
      ->capture_default_str();
  // `fulcrum-local-node shim DIR` is how the agent starts a container's shim (runtime/shim.h);
  // the agent's own flags do not apply to it.
  if (!args.empty() && args[0] == "shim") {
    if (args.size() != 2) return InvalidArgument("shim", "takes exactly one state folder");
    flags.shim = true;
    flags.shim_state_dir = args[1];
    return flags;
  }
  // `fulcrum-local-node check-inventory FILE`: what tests/cluster/up runs before it starts
  // anything.
  if (!args.empty() && args[0] == "check-inventory") {
    if (args.size() != 2)
      return InvalidArgument("check-inventory", "takes exactly one inventory file");
    flags.check_inventory = true;
    flags.nodes_file = args[1];
    return flags;
  }
  Result<CommandLine> parsed = ParseCommandLine(app, args);
  if (!parsed.ok()) return parsed.error();
  if (*parsed == CommandLine::kHelpAsked)
    return MakeError(ErrorCode::kFailedPrecondition, app.help());
  if (Status status = RequireFile("--kubeconfig", flags.kubeconfig, "the agent's kubeconfig");
      !status.ok()) {
    return status.error();
  }
  if (Status status = RequireFile("--nodes", flags.nodes_file, "the node inventory");
      !status.ok()) {
    return status.error();
  }
  if (flags.kubelet_port < 0 || flags.kubelet_port > 65535) {
    return InvalidArgument("--kubelet-port",
                           "must be 0..65535, got " + std::to_string(flags.kubelet_port));
  }
  for (const auto& [flag, value] : {std::pair{"--tls-cert-file", flags.tls_cert_file},
                                    {"--tls-private-key-file", flags.tls_private_key_file},
                                    {"--client-ca-file", flags.client_ca_file}}) {
    if (Status status = RequireFile(
            flag, value,
            "the log server that `kubectl logs` reaches needs a serving certificate, its key "
            "and the CA of the API server's kubelet client certificate");
        !status.ok()) {
      return status.error();
    }
  }
  if (!(flags.restart_backoff_seconds > 0) ||
      !(flags.max_restart_backoff_seconds >= flags.restart_backoff_seconds)) {
    return InvalidArgument(
        "--restart-backoff",
        "must be > 0 and at most --max-restart-backoff (kubelet: 10 and 300 seconds)");
  }
  if (flags.shutdown_grace_seconds < 0) return InvalidArgument("--shutdown-grace", "must be >= 0");
  for (const std::string& dir : flags.path) {
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      return InvalidArgument("--path", "'" + dir + "' is not a folder");
    }
  }
  return flags;
}

}  // namespace fulcrum::local_node
