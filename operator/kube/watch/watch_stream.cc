#include "operator/kube/watch/watch_stream.h"

namespace fulcrum::kube {

WatchStream::WatchStream(std::unique_ptr<ResponseStream> body, std::string description,
                         std::size_t max_event_bytes)
    : body_(std::move(body)), description_(std::move(description)), decoder_(max_event_bytes) {}

Result<std::optional<WatchEvent>> WatchStream::Next() {
  constexpr std::size_t kReadSize = 64 * 1024;
  while (true) {
    auto line = decoder_.NextLine();
    if (!line.ok()) return MakeError(line.error().code, description_ + ": " + line.error().message);
    if (line->has_value()) {
      auto event = DecodeWatchEvent(**line, description_);
      if (!event.ok()) return event.error();
      return std::optional<WatchEvent>(std::move(event).value());
    }
    auto bytes = body_->ReadSome(kReadSize);
    if (!bytes.ok()) return bytes.error();
    if (bytes->empty()) {
      if (decoder_.pending_bytes() > 0) {
        return MakeError(ErrorCode::kUnavailable,
                         description_ + ": stream ended in the middle of an event");
      }
      return std::optional<WatchEvent>();
    }
    decoder_.Feed(*bytes);
  }
}

}  // namespace fulcrum::kube
