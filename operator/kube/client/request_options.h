// The options of each API verb, as in metav1.ListOptions, PatchOptions and
// DeleteOptions, and their encoding into query strings and bodies.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fulcrum::kube {

struct ListOptions {
  std::string label_selector;  // "app=x,tier in (a,b)"
  std::string field_selector;  // "metadata.name=x", "spec.nodeName=n"
  int limit = 0;               // page size; 0 = everything in one response
  std::string continue_token;  // from the previous page
  // "" = a consistent (quorum) read; "0" = any cached version. Opaque otherwise.
  std::string resource_version;
  std::string resource_version_match;  // "NotOlderThan" | "Exact"
  // Watch only:
  int timeout_seconds = 0;
  bool allow_watch_bookmarks = false;

  // "?labelSelector=...&limit=..." (empty if nothing is set); `watch` adds watch=1.
  std::string ToQuery(bool watch = false) const;
};

enum class PatchType {
  kMerge,           // application/merge-patch+json (RFC 7386)
  kJson,            // application/json-patch+json (RFC 6902)
  kStrategicMerge,  // application/strategic-merge-patch+json (built-in types only)
  kApply,           // application/apply-patch+yaml: server-side apply (JSON is valid YAML)
};
const char* ContentType(PatchType type);

struct PatchOptions {
  std::string field_manager;  // required for kApply
  bool force = false;         // kApply: take ownership of conflicting fields
  std::string subresource;    // e.g. "status"
  bool dry_run = false;
};

// A patch of the status subresource (pods/status, nodes/status), as kubelet writes status.
inline PatchOptions StatusPatchOptions() {
  PatchOptions options;
  options.subresource = "status";
  return options;
}

enum class PropagationPolicy { kDefault, kForeground, kBackground, kOrphan };

struct DeleteOptions {
  PropagationPolicy propagation = PropagationPolicy::kDefault;
  std::optional<int> grace_period_seconds;
  // Preconditions: delete only if the object still has this uid / version.
  std::string precondition_uid;
  std::string precondition_resource_version;

  nlohmann::json ToBody() const;  // a meta.k8s.io/v1 DeleteOptions object
};

}  // namespace fulcrum::kube
