// The downward API's selectors, shared by env (valueFrom) and by
// downwardAPI/projected volumes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

// `selector` is an ObjectFieldSelector {apiVersion, fieldPath}: its apiVersion
// must be v1 or absent, then ResolveFieldRef (container_environment.h) gives the value.
Result<std::string> ResolveFieldSelector(const nlohmann::json& pod, const nlohmann::json& selector,
                                         const PodRuntimeFacts& facts, bool allow_whole_maps,
                                         const std::string& field);

// `selector` is a ResourceFieldSelector {containerName, resource, divisor}. Its
// containerName names a container of the pod; when empty, `default_container`
// is used (env of that container), and when that is null too (volumes, where
// the API requires containerName) it is an error. The value is an integer count
// of `divisor` (default 1), rounded up, as apimachinery's
// ExtractContainerResourceValue does. Errors are kInvalidArgument naming `field`.
Result<std::string> ResolveResourceFieldRef(const nlohmann::json& pod,
                                            const nlohmann::json& selector,
                                            const nlohmann::json* default_container,
                                            const std::string& field);

}  // namespace fulcrum::local_node
