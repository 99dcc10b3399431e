// A watch response read as a sequence of events.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "common/result.h"
#include "operator/kube/rest/rest_client.h"
#include "operator/kube/watch/ndjson_decoder.h"
#include "operator/kube/watch/watch_event.h"

namespace fulcrum::kube {

class WatchStream {
 public:
  // An event longer than `max_event_bytes` (as one JSON line) fails the
  // stream (kInternal) instead of being buffered without bound.
  WatchStream(std::unique_ptr<ResponseStream> body, std::string description,
              std::size_t max_event_bytes = NdjsonDecoder::kDefaultMaxLineBytes);

  // The next event; std::nullopt when the server ended the stream normally
  // (timeoutSeconds reached): resume from the last resourceVersion seen. An
  // Error when the connection broke, a line did not decode, or the server sent
  // an ERROR event (kExpired for 410: re-list).
  Result<std::optional<WatchEvent>> Next();

  // From any thread: ends the stream; Next then returns an error.
  void Cancel() { body_->Cancel(); }

 private:
  std::unique_ptr<ResponseStream> body_;
  std::string description_;
  NdjsonDecoder decoder_;
};

}  // namespace fulcrum::kube
