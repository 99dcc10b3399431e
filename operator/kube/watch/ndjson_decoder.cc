#include "operator/kube/watch/ndjson_decoder.h"

namespace fulcrum::kube {

std::optional<std::string> NdjsonDecoder::NextLine() {
  while (true) {
    const std::size_t newline = buffer_.find('\n', consumed_);
    if (newline == std::string::npos) {
      // Drop what was consumed so the buffer holds only the partial line.
      buffer_.erase(0, consumed_);
      consumed_ = 0;
      return std::nullopt;
    }
    std::size_t end = newline;
    if (end > consumed_ && buffer_[end - 1] == '\r') --end;
    std::string line = buffer_.substr(consumed_, end - consumed_);
    consumed_ = newline + 1;
    if (line.find_first_not_of(" \t") != std::string::npos) return line;
  }
}

}  // namespace fulcrum::kube
