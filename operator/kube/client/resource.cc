#include "operator/kube/client/resource.h"

#include <cstdio>

namespace fulcrum::kube {

std::string UrlEncode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += c;
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", byte);
      out += escaped;
    }
  }
  return out;
}

std::string CollectionPath(const ResourceType& type, std::string_view ns) {
  std::string path =
      type.group.empty() ? "/api/" + type.version : "/apis/" + type.group + "/" + type.version;
  if (type.namespaced && !ns.empty()) path += "/namespaces/" + UrlEncode(ns);
  return path + "/" + type.resource;
}

std::string ObjectPath(const ResourceType& type, std::string_view ns, std::string_view name,
                       std::string_view subresource) {
  std::string path = CollectionPath(type, ns) + "/" + UrlEncode(name);
  if (!subresource.empty()) path += "/" + std::string(subresource);
  return path;
}

namespace resources {
ResourceType Pods() {
  return {"", "v1", "pods", true};
}
ResourceType ConfigMaps() {
  return {"", "v1", "configmaps", true};
}
ResourceType Secrets() {
  return {"", "v1", "secrets", true};
}
ResourceType PersistentVolumeClaims() {
  return {"", "v1", "persistentvolumeclaims", true};
}
ResourceType PersistentVolumes() {
  return {"", "v1", "persistentvolumes", false};
}
ResourceType Services() {
  return {"", "v1", "services", true};
}
ResourceType NetworkPolicies() {
  return {"networking.k8s.io", "v1", "networkpolicies", true};
}
ResourceType Namespaces() {
  return {"", "v1", "namespaces", false};
}
ResourceType Nodes() {
  return {"", "v1", "nodes", false};
}
ResourceType Leases() {
  return {"coordination.k8s.io", "v1", "leases", true};
}
ResourceType ServiceAccounts() {
  return {"", "v1", "serviceaccounts", true};
}
ResourceType Events() {
  return {"events.k8s.io", "v1", "events", true};
}
}  // namespace resources

}  // namespace fulcrum::kube
