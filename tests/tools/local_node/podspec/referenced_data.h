// The key/value data of the Secrets and ConfigMaps a pod refers to, read through
// PodReferences and decoded (Secret data and ConfigMap binaryData are base64 in
// the API's JSON), with kubelet's rules for missing and optional references.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "tests/tools/local_node/podspec/pod_references.h"

namespace fulcrum::local_node {

enum class ReferencedKind { kSecret, kConfigMap };

const char* KindName(ReferencedKind kind);  // "Secret" or "ConfigMap"

// Decoded entries by key. For a ConfigMap: data and binaryData together (kubelet
// projects both into volumes); envFrom and configMapKeyRef read `data` only, so
// they pass include_binary_data = false.
using ReferencedEntries = std::map<std::string, std::string, std::less<>>;

// std::nullopt: the object does not exist and the reference is optional (kubelet
// then skips it). A missing object that is not optional: kFailedPrecondition
// naming `field`; another read failure keeps its code and gains the field.
Result<std::optional<ReferencedEntries>> ReadReferencedEntries(
    PodReferences& references, ReferencedKind kind, const std::string& ns, const std::string& name,
    bool optional, bool include_binary_data, const std::string& field);

// The error for a key the object lacks, when the reference is not optional.
Error MissingKeyError(ReferencedKind kind, const std::string& ns, const std::string& name,
                      std::string_view key, const std::string& field);

}  // namespace fulcrum::local_node
