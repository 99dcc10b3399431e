// A container's environment, command and args as kubelet builds them
// (pkg/kubelet/kubelet_pods.go makeEnvironmentVariables): `base` first (what the
// node adds), then envFrom in order (with its prefix), then env[] in order; a
// later duplicate replaces an earlier one in place. Only literal env[].value is
// $(VAR)-expanded, against the variables before it; valueFrom values are not.
// command and args are expanded against the final environment.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

struct EnvVar {
  std::string name;
  std::string value;
  bool operator==(const EnvVar&) const = default;
};

// `field_prefix` names the container for errors, e.g. "spec.containers[1]".
// Errors name the field, e.g. `spec.containers[0].env[2].valueFrom.secretKeyRef`:
// - a referenced Secret/ConfigMap or key that is missing (and not optional):
//   ErrorCode::kFailedPrecondition; kubelet reports CreateContainerConfigError and retries;
// - a source this agent cannot provide (an unknown fieldPath, resourceFieldRef of an
//   unsupported resource): ErrorCode::kInvalidArgument.
Result<std::vector<EnvVar>> BuildContainerEnvironment(
    const nlohmann::json& pod, const nlohmann::json& container, const std::string& field_prefix,
    const PodRuntimeFacts& facts, PodReferences& references, const std::vector<EnvVar>& base);

struct CommandLine {
  std::vector<std::string>
      command;  // empty: the image's entrypoint (the caller decides what that is)
  std::vector<std::string> args;
};
CommandLine ExpandCommandAndArgs(const nlohmann::json& container,
                                 const std::vector<EnvVar>& environment);

// The downward API's fieldRef (env and downwardAPI volumes): metadata.name,
// metadata.namespace, metadata.uid, metadata.labels['k'], metadata.annotations['k'],
// spec.nodeName, spec.serviceAccountName, status.podIP, status.podIPs, status.hostIP,
// status.hostIPs; `allow_whole_maps` adds metadata.labels and metadata.annotations
// (volumes only: `k="v"` lines, sorted by key). Unknown paths: kInvalidArgument naming `field`.
Result<std::string> ResolveFieldRef(const nlohmann::json& pod, const std::string& field_path,
                                    const PodRuntimeFacts& facts, bool allow_whole_maps,
                                    const std::string& field);

}  // namespace fulcrum::local_node
