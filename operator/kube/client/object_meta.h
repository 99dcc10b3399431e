// Reading the standard metadata of an object given as JSON. Tolerant: a
// missing or mistyped field reads as "" rather than throwing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fulcrum::kube {

// object.metadata, or an empty object.
const nlohmann::json& MetadataOf(const nlohmann::json& object);
// object[key] if it is a string, else "".
std::string StringField(const nlohmann::json& object, const char* key);

std::string NameOf(const nlohmann::json& object);
std::string NamespaceOf(const nlohmann::json& object);
std::string ResourceVersionOf(const nlohmann::json& object);
std::string UidOf(const nlohmann::json& object);
// "namespace/name", or "name" for cluster-scoped objects (client-go's
// MetaNamespaceKeyFunc): the informer cache's key.
std::string ObjectKey(const nlohmann::json& object);

}  // namespace fulcrum::kube
