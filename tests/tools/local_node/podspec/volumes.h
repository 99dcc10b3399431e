// A pod's volumes made real on the local disk, and each container's mounts of
// them. Kubelet's volume plugins, for the kinds a local agent can honour:
// secret, configMap, downwardAPI and projected (secret, configMap, downwardAPI,
// serviceAccountToken, clusterTrustBundle excluded) become files under
// `pod_dir/volumes/<name>` with their keys/items, paths and modes; emptyDir a
// directory there (medium Memory too: it is not a tmpfs here); hostPath the
// host's path itself, checked against its `type`; persistentVolumeClaim the
// directory of the hostPath or local PersistentVolume the claim is bound to.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/tools/local_node/podspec/container_environment.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

struct PreparedVolume {
  std::string name;
  std::filesystem::path host_path;  // a directory, or for hostPath of a file type the file
  // Kubelet mounts secret, configMap, downwardAPI and projected volumes read-only
  // whatever the volumeMount says; ContainerMounts carries that into BindMount.
  bool read_only = false;
};

struct BindMount {
  std::filesystem::path source;  // on the host
  std::string target;            // the container's mountPath (an absolute path)
  bool read_only = false;
};

// Writes every volume of `pod` under `pod_dir/volumes/`. Re-running it refreshes
// file contents (secret and configMap volumes follow their objects). Errors name
// the field (`spec.volumes[2]`) and the volume:
// - a volume type this agent does not support (nfs, iscsi, ...), or a claim bound to a
//   PersistentVolume of such a type: kInvalidArgument, saying which types are supported
//   (the pod must fail);
// - a missing Secret/ConfigMap/key that is not optional, a hostPath whose `type`
//   check fails, a claim that is missing or not yet Bound: kFailedPrecondition (kubelet
//   keeps the pod ContainerCreating and retries).
Result<std::vector<PreparedVolume>> PrepareVolumes(const nlohmann::json& pod,
                                                   const PodRuntimeFacts& facts,
                                                   PodReferences& references,
                                                   const std::filesystem::path& pod_dir);

// The container's volumeMounts resolved against the prepared volumes: subPath
// (created inside the volume when missing), subPathExpr expanded against the
// container's environment, readOnly. A mount of an unknown volume, a relative
// mountPath, or a subPath that leaves the volume (`..`, absolute): kInvalidArgument
// naming `field_prefix.volumeMounts[i]`.
Result<std::vector<BindMount>> ContainerMounts(const nlohmann::json& container,
                                               const std::string& field_prefix,
                                               const std::vector<PreparedVolume>& volumes,
                                               const std::vector<EnvVar>& environment);

}  // namespace fulcrum::local_node
