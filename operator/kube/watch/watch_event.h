// One event of a watch stream (metav1.WatchEvent) and its decoding.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"

namespace fulcrum::kube {

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark };
const char* ToString(WatchEventType type);

struct WatchEvent {
  WatchEventType type = WatchEventType::kAdded;
  // The object; for kBookmark only metadata.resourceVersion is meaningful.
  nlohmann::json object;

  std::string ResourceVersion() const;
};

// Decodes one line. An ERROR event becomes the Error it carries (a 410 inside
// the stream is kExpired, exactly like an HTTP 410 on the request).
Result<WatchEvent> DecodeWatchEvent(std::string_view line, std::string_view description);

}  // namespace fulcrum::kube
