// Which collection a request addresses: group, version and plural resource
// name, as in client-go's schema.GroupVersionResource, plus whether it lives in
// namespaces. Works the same for built-in types and custom resources.
#pragma once

#include <string>
#include <string_view>

namespace fulcrum::kube {

struct ResourceType {
  std::string group;     // "" for the core group (served under /api)
  std::string version;   // "v1"
  std::string resource;  // plural, lower case: "pods", "heterotrainingjobs"
  bool namespaced = true;

  std::string GroupVersion() const { return group.empty() ? version : group + "/" + version; }
};

// /api/v1/namespaces/{ns}/pods or /apis/{group}/{version}/...; an empty
// namespace addresses all namespaces (or a cluster-scoped resource).
std::string CollectionPath(const ResourceType& type, std::string_view ns);
// CollectionPath + /{name}[/{subresource}].
std::string ObjectPath(const ResourceType& type, std::string_view ns, std::string_view name,
                       std::string_view subresource = {});

// Percent-encodes one query or path component.
std::string UrlEncode(std::string_view text);

// Built-in resources this project uses.
namespace resources {
ResourceType Pods();
ResourceType ConfigMaps();
ResourceType Secrets();
ResourceType Services();
ResourceType NetworkPolicies();  // networking.k8s.io/v1
ResourceType Namespaces();
ResourceType Nodes();
ResourceType Leases();
ResourceType ServiceAccounts();
ResourceType Events();  // events.k8s.io/v1
ResourceType PersistentVolumeClaims();
ResourceType PersistentVolumes();  // cluster-scoped
}  // namespace resources

}  // namespace fulcrum::kube
