// fulcrum-local-node: registers the inventory's emulated GPU nodes, keeps them
// alive, runs the pods bound to them as local processes and serves their logs.
// SIGTERM/SIGINT stop every process it started; SIGKILL leaves them running for
// the next agent to adopt. docs/local-node.md says what is emulated and what is not.
#include <cpprest/base_uri.h>
#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "common/log.h"
#include "operator/kube/config/kubeconfig.h"
#include "operator/kube/events/event_recorder.h"
#include "tests/tools/local_node/agent_flags.h"
#include "tests/tools/local_node/logs/log_server.h"
#include "tests/tools/local_node/node/emulated_nodes.h"
#include "tests/tools/local_node/node/inventory.h"
#include "tests/tools/local_node/pods/api_pod_references.h"
#include "tests/tools/local_node/pods/pod_manager.h"
#include "tests/tools/local_node/runtime/shim.h"

namespace fulcrum::local_node {
namespace {

using namespace std::chrono_literals;
const log::Logger kLog{"local-node"};

int Fail(const std::string& message, int code = 2) {
  std::fprintf(stderr, "fulcrum-local-node: %s\n", message.c_str());
  return code;
}

// "https://127.0.0.1:6443" -> {"127.0.0.1", "6443"}; https's 443 when the URL names no port.
std::pair<std::string, std::string> HostAndPort(const std::string& server) {
  const web::uri uri(utility::conversions::to_string_t(server));
  const int port = uri.port() > 0 ? uri.port() : 443;
  return {utility::conversions::to_utf8string(uri.host()), std::to_string(port)};
}

int RunAgent(const AgentFlags& flags) {
  auto inventory = LoadInventory(flags.nodes_file);
  if (!inventory.ok()) return Fail("bad node inventory: " + inventory.error().message);
  auto pool = PodIpPool::Create(flags.pod_ip_range);
  if (!pool.ok()) return Fail(pool.error().field + ": " + pool.error().message);
  auto config = kube::LoadKubeconfig(flags.kubeconfig);
  if (!config.ok()) return Fail("--kubeconfig: " + config.error().ToString());
  auto rest = kube::RestClient::Create(*config);
  if (!rest.ok()) return Fail("--kubeconfig: " + rest.error().ToString());
  auto client =
      std::make_shared<kube::ApiClient>(std::shared_ptr<kube::RestClient>(std::move(rest).value()));

  std::error_code error;
  const std::filesystem::path work_dir = std::filesystem::absolute(flags.work_dir);
  std::filesystem::create_directories(work_dir / "pods", error);
  if (error) return Fail("--work-dir: cannot create " + work_dir.string() + ": " + error.message());

  AgentContext context;
  context.work_dir = work_dir;
  context.shim_command = {std::filesystem::read_symlink("/proc/self/exe", error).string(), "shim"};
  for (const auto& dir : flags.path) context.search_dirs.push_back(std::filesystem::absolute(dir));
  const char* path = std::getenv("PATH");
  context.path_variable = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  context.host_ip = flags.kubelet_address;
  std::tie(context.apiserver_host, context.apiserver_port) = HostAndPort(config->server);
  context.restart_backoff.initial =
      std::chrono::milliseconds(static_cast<long>(flags.restart_backoff_seconds * 1000));
  context.restart_backoff.max =
      std::chrono::milliseconds(static_cast<long>(flags.max_restart_backoff_seconds * 1000));
  context.shutdown_grace = std::chrono::seconds(flags.shutdown_grace_seconds);
  context.slowdown_files = SlowdownFiles(work_dir);
  context.client = client;
  context.references = std::make_shared<ApiPodReferences>(client);
  kube::EventRecorderOptions event_options;
  event_options.reporting_controller = "fulcrum.dev/local-node";
  event_options.reporting_instance = "fulcrum-local-node";
  context.events = std::make_shared<kube::EventRecorder>(client, event_options);

  auto pods = std::make_shared<PodManager>(context, std::move(pool).value());
  pods->LoadDiskState();
  LogServerOptions log_options;
  log_options.address = flags.kubelet_address;
  log_options.port = flags.kubelet_port;
  log_options.cert_file = flags.tls_cert_file;
  log_options.key_file = flags.tls_private_key_file;
  log_options.client_ca_file = flags.client_ca_file;
  auto log_server = LogServer::Start(log_options, pods);
  if (!log_server.ok())
    return Fail(log_server.error().field + ": " + log_server.error().message, 1);

  EmulatedNodes nodes(client, *inventory,
                      NodeEndpoint{flags.kubelet_address, (*log_server)->port()},
                      SlowdownFiles(work_dir));
  if (Status registered = nodes.Register(); !registered.ok()) {
    return Fail("cannot register the nodes: " + registered.error().ToString(), 1);
  }
  for (const NodeSpec& node : *inventory) pods->WatchNode(node.name);
  nodes.Start([pods](const std::string& node) { pods->NodeDeleted(node); });
  if (pods->WaitForSync(60s)) {
    pods->RemoveUnclaimed();
  } else {
    kLog.Warning(
        "the pod watches did not sync within 60 s; an earlier agent's leftovers stay until "
        "restart");
  }
  kLog.Info("ready", {{"nodes", inventory->size()},
                      {"kubeletEndpoint",
                       flags.kubelet_address + ":" + std::to_string((*log_server)->port())},
                      {"workDir", work_dir.string()}});

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  int received = 0;
  sigwait(&stop_signals, &received);
  kLog.Info("stopping: every container is stopped", {{"signal", received}});
  nodes.Stop();
  pods->Shutdown();
  context.events->Flush();
  kLog.Info("stopped");
  return 0;
}

}  // namespace
}  // namespace fulcrum::local_node

int main(int argc, char** argv) {
  using namespace fulcrum::local_node;
  auto flags = ParseAgentFlags(std::vector<std::string>(argv + 1, argv + argc));
  if (!flags.ok()) {
    if (flags.error().code == fulcrum::ErrorCode::kFailedPrecondition) {
      std::cout << flags.error().message;
      return 0;
    }
    return Fail(flags.error().field + ": " + flags.error().message);
  }
  if (flags->shim) return RunShim(flags->shim_state_dir);
  if (flags->check_inventory) {
    auto inventory = LoadInventory(flags->nodes_file);
    if (!inventory.ok()) return Fail("bad node inventory: " + inventory.error().message);
    for (const NodeSpec& node : *inventory) std::cout << node.name << "\n";
    return 0;
  }
  // Stop signals are taken by the main thread alone (sigwait): block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return RunAgent(*flags);
}
