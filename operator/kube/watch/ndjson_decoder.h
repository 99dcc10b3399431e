// Splits a byte stream into lines of newline-delimited JSON. A watch body
// arrives in chunks that do not align with events: one chunk may hold half an
// event, or three and a half. Pure; no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace fulcrum::kube {

class NdjsonDecoder {
 public:
  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete, non-empty line (without "\n" or "\r\n"), if one is in.
  std::optional<std::string> NextLine();
  // Bytes received that do not yet form a complete line.
  std::size_t pending_bytes() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;
  std::size_t consumed_ = 0;  // start of the unread part; compacted lazily
};

}  // namespace fulcrum::kube
