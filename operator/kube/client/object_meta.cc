#include "operator/kube/client/object_meta.h"

namespace fulcrum::kube {

const nlohmann::json& MetadataOf(const nlohmann::json& object) {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  if (!object.is_object()) return kEmpty;
  const auto metadata = object.find("metadata");
  return metadata != object.end() && metadata->is_object() ? *metadata : kEmpty;
}

std::string StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto value = object.find(key);
  return value != object.end() && value->is_string() ? value->get<std::string>() : std::string();
}

std::string NameOf(const nlohmann::json& object) {
  return StringField(MetadataOf(object), "name");
}
std::string NamespaceOf(const nlohmann::json& object) {
  return StringField(MetadataOf(object), "namespace");
}
std::string ResourceVersionOf(const nlohmann::json& object) {
  return StringField(MetadataOf(object), "resourceVersion");
}
std::string UidOf(const nlohmann::json& object) {
  return StringField(MetadataOf(object), "uid");
}

std::string ObjectKey(const nlohmann::json& object) {
  const std::string ns = NamespaceOf(object);
  return ns.empty() ? NameOf(object) : ns + "/" + NameOf(object);
}

}  // namespace fulcrum::kube
