// Splits a byte stream into lines of newline-delimited JSON. A watch body
// arrives in chunks that do not align with events: one chunk may hold half an
// event, or three and a half. Pure; no I/O.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace fulcrum::kube {

class NdjsonDecoder {
 public:
  // A line (one watch event) may be at most this long. The API server stores
  // objects of at most 1.5 MiB by default (etcd's request limit), so a real
  // event is far below it; the bound is what keeps a broken or hostile server
  // that never sends a newline from growing the buffer without end.
  // client-go's streaming decoder has the same bound (16 MiB).
  static constexpr std::size_t kDefaultMaxLineBytes = 16 * 1024 * 1024;

  explicit NdjsonDecoder(std::size_t max_line_bytes = kDefaultMaxLineBytes)
      : max_line_bytes_(max_line_bytes) {}

  void Feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next complete, non-empty line (without "\n" or "\r\n") if one is in;
  // nullopt if none is complete yet. An error (kInternal, like undecodable
  // data: the reflector re-lists) naming the limit once
  // a line (complete or not) is longer than max_line_bytes: the stream cannot
  // be read further.
  Result<std::optional<std::string>> NextLine();
  // Bytes received that do not yet form a complete line.
  std::size_t pending_bytes() const { return buffer_.size() - consumed_; }
  std::size_t max_line_bytes() const { return max_line_bytes_; }

 private:
  Error TooLong(std::size_t bytes, bool complete) const;

  std::size_t max_line_bytes_;
  std::string buffer_;
  std::size_t consumed_ = 0;  // start of the unread part; compacted lazily
};

}  // namespace fulcrum::kube
