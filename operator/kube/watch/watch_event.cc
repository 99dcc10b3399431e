#include "operator/kube/watch/watch_event.h"

#include "operator/kube/rest/api_error.h"

namespace fulcrum::kube {

const char* ToString(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "?";
}

std::string WatchEvent::ResourceVersion() const {
  const auto metadata = object.find("metadata");
  if (metadata == object.end() || !metadata->is_object()) return {};
  // Whatever the server sent: a resourceVersion that is not a string is no version.
  const auto version = metadata->find("resourceVersion");
  return version != metadata->end() && version->is_string() ? version->get<std::string>() : "";
}

Result<WatchEvent> DecodeWatchEvent(std::string_view line, std::string_view description) {
  nlohmann::json decoded = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!decoded.is_object() || !decoded.contains("type") || !decoded["type"].is_string()) {
    return MakeError(ErrorCode::kInternal, std::string(description) +
                                               ": watch event is not JSON with a type: " +
                                               std::string(line.substr(0, 200)));
  }
  const std::string type = decoded["type"].get<std::string>();
  nlohmann::json object = std::move(decoded["object"]);
  if (type == "ERROR") {
    // A Status's code, when it is one: a server (or a proxy) may send anything here.
    const int code =
        object.is_object() && object.contains("code") && object["code"].is_number_integer() &&
                object["code"].get<int64_t>() >= 100 && object["code"].get<int64_t>() <= 599
            ? object["code"].get<int>()
            : 500;
    return DecodeApiFailure(code, object.is_null() ? std::string_view() : object.dump(), {},
                            std::string(description) + " (in-stream ERROR event)")
        .error;
  }
  WatchEvent event;
  event.object = std::move(object);
  if (type == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (type == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (type == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (type == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else {
    return MakeError(ErrorCode::kInternal,
                     std::string(description) + ": unknown watch event type '" + type + "'");
  }
  return event;
}

}  // namespace fulcrum::kube
