// Loading a ClusterConfig: from a kubeconfig file (as kubectl reads it) or from
// the in-cluster service account. Errors name the file, the context and the field.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "operator/kube/config/cluster_config.h"

namespace fulcrum::kube {

// Reads one kubeconfig file. `context` empty means current-context. Relative
// file paths inside resolve against the kubeconfig's own folder, as kubectl does.
Result<ClusterConfig> LoadKubeconfig(const std::filesystem::path& file,
                                     std::string_view context = {});
// The same for a kubeconfig's text, as if read from `file` (for its relative paths and errors).
Result<ClusterConfig> ParseKubeconfigText(std::string_view yaml, const std::filesystem::path& file,
                                          std::string_view context = {});

// Where a pod finds its service account; overridable for tests.
struct InClusterPaths {
  std::filesystem::path token = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::filesystem::path ca = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::filesystem::path ns = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup ProcessEnvironment();

// KUBERNETES_SERVICE_HOST/PORT plus the service-account files.
Result<ClusterConfig> LoadInClusterConfig(const EnvLookup& env, const InClusterPaths& paths = {});

// kubectl's order: an explicit file, else $KUBECONFIG, else in-cluster, else ~/.kube/config.
Result<ClusterConfig> LoadDefaultConfig(const std::filesystem::path& explicit_file,
                                        std::string_view context, const EnvLookup& env);

}  // namespace fulcrum::kube
