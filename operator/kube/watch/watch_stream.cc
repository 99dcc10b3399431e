#include "operator/kube/watch/watch_stream.h"

namespace fulcrum::kube {

WatchStream::WatchStream(std::unique_ptr<ResponseStream> body, std::string description)
    : body_(std::move(body)), description_(std::move(description)) {}

Result<std::optional<WatchEvent>> WatchStream::Next() {
  constexpr std::size_t kReadSize = 64 * 1024;
  while (true) {
    if (auto line = decoder_.NextLine()) {
      auto event = DecodeWatchEvent(*line, description_);
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
