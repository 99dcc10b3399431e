#include "tests/tools/local_node/node/node_objects.h"

#include <sys/utsname.h>

#include <functional>

#include "common/rfc3339.h"

namespace fulcrum::local_node {
namespace {

// The version this agent answers as: the control plane's, marked as ours.
constexpr const char* kKubeletVersion = "v1.34.4";
constexpr const char* kRuntimeVersion = "fulcrum-local-node://0.1.0";
// Kubelet's node lease duration (40 s), renewed every quarter of it.
constexpr int kLeaseDurationSeconds = 40;

std::string KernelVersion() {
  utsname name{};
  return ::uname(&name) == 0 ? name.release : "unknown";
}

// Stable per node name, so a re-registered node keeps its identity.
std::string NodeId(const std::string& name, const char* salt) {
  const std::size_t hash = std::hash<std::string>{}(name + salt);
  char text[33];
  std::snprintf(text, sizeof text, "%016zx%016zx", hash,
                static_cast<std::size_t>(hash ^ 0x9e3779b97f4a7c15ULL));
  return text;
}

nlohmann::json Condition(const char* type, const char* status, const char* reason,
                         const char* message, const std::string& heartbeat,
                         const std::string& transition) {
  return {{"type", type},
          {"status", status},
          {"reason", reason},
          {"message", message},
          {"lastHeartbeatTime", heartbeat},
          {"lastTransitionTime", transition}};
}

}  // namespace

nlohmann::json NodeStatus(const NodeSpec& node, const NodeEndpoint& endpoint,
                          std::chrono::system_clock::time_point now,
                          std::chrono::system_clock::time_point transition) {
  const std::string heartbeat = FormatRfc3339(now);
  const std::string changed = FormatRfc3339(transition);
  return {
      {"capacity", node.capacity},
      {"allocatable", node.capacity},
      {"conditions",
       {Condition("MemoryPressure", "False", "KubeletHasSufficientMemory",
                  "kubelet has sufficient memory available", heartbeat, changed),
        Condition("DiskPressure", "False", "KubeletHasNoDiskPressure",
                  "kubelet has no disk pressure", heartbeat, changed),
        Condition("PIDPressure", "False", "KubeletHasSufficientPID",
                  "kubelet has sufficient PID available", heartbeat, changed),
        Condition("Ready", "True", "KubeletReady",
                  "fulcrum-local-node is posting ready status (an emulated GPU node: pods run as "
                  "local processes)",
                  heartbeat, changed)}},
      {"addresses",
       {{{"type", "InternalIP"}, {"address", endpoint.address}},
        {{"type", "Hostname"}, {"address", node.name}}}},
      {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", endpoint.kubelet_port}}}}},
      {"nodeInfo",
       {{"machineID", NodeId(node.name, "machine")},
        {"systemUUID", NodeId(node.name, "system")},
        {"bootID", NodeId(node.name, "boot")},
        {"kernelVersion", KernelVersion()},
        {"osImage",
         "emulated " + node.labels.at("nvidia.com/gpu.product") + " node (fulcrum-local-node)"},
        {"containerRuntimeVersion", kRuntimeVersion},
        {"kubeletVersion", kKubeletVersion},
        {"kubeProxyVersion", ""},
        {"operatingSystem", "linux"},
        {"architecture", "amd64"}}},
  };
}

nlohmann::json NodeForRegistration(const NodeSpec& node, const NodeEndpoint& endpoint,
                                   std::chrono::system_clock::time_point now) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", node.name},
            {"labels", node.labels},
            {"annotations",
             {{"volumes.kubernetes.io/controller-managed-attach-detach", "true"},
              {"fulcrum.dev/emulated", "true"}}}}},
          {"spec", nlohmann::json::object()},
          {"status", NodeStatus(node, endpoint, now, now)}};
}

nlohmann::json NodeLease(const std::string& node_name, const std::string& node_uid,
                         std::chrono::system_clock::time_point now) {
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", node_name},
            {"namespace", "kube-node-lease"},
            {"ownerReferences",
             {{{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node_name}, {"uid", node_uid}}}}}},
          {"spec",
           {{"holderIdentity", node_name},
            {"leaseDurationSeconds", kLeaseDurationSeconds},
            {"renewTime", FormatRfc3339(now, TimePrecision::kMicroseconds)}}}};
}

}  // namespace fulcrum::local_node
