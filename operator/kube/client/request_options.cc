#include "operator/kube/client/request_options.h"

#include "operator/kube/client/resource.h"

namespace fulcrum::kube {

std::string ListOptions::ToQuery(bool watch) const {
  std::string query;
  auto add = [&query](const char* key, const std::string& value) {
    query += query.empty() ? "?" : "&";
    query += key;
    query += "=";
    query += UrlEncode(value);
  };
  if (watch) add("watch", "1");
  if (!label_selector.empty()) add("labelSelector", label_selector);
  if (!field_selector.empty()) add("fieldSelector", field_selector);
  if (limit > 0) add("limit", std::to_string(limit));
  if (!continue_token.empty()) add("continue", continue_token);
  if (!resource_version.empty()) add("resourceVersion", resource_version);
  if (!resource_version_match.empty()) add("resourceVersionMatch", resource_version_match);
  if (timeout_seconds > 0) add("timeoutSeconds", std::to_string(timeout_seconds));
  if (allow_watch_bookmarks) add("allowWatchBookmarks", "true");
  return query;
}

const char* ContentType(PatchType type) {
  switch (type) {
    case PatchType::kMerge:
      return "application/merge-patch+json";
    case PatchType::kJson:
      return "application/json-patch+json";
    case PatchType::kStrategicMerge:
      return "application/strategic-merge-patch+json";
    case PatchType::kApply:
      return "application/apply-patch+yaml";
  }
  return "application/merge-patch+json";
}

nlohmann::json DeleteOptions::ToBody() const {
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  switch (propagation) {
    case PropagationPolicy::kDefault:
      break;
    case PropagationPolicy::kForeground:
      body["propagationPolicy"] = "Foreground";
      break;
    case PropagationPolicy::kBackground:
      body["propagationPolicy"] = "Background";
      break;
    case PropagationPolicy::kOrphan:
      body["propagationPolicy"] = "Orphan";
      break;
  }
  if (grace_period_seconds) body["gracePeriodSeconds"] = *grace_period_seconds;
  if (!precondition_uid.empty()) body["preconditions"]["uid"] = precondition_uid;
  if (!precondition_resource_version.empty()) {
    body["preconditions"]["resourceVersion"] = precondition_resource_version;
  }
  return body;
}

}  // namespace fulcrum::kube
