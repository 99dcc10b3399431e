#include "operator/kube/watch/ndjson_decoder.h"

namespace fulcrum::kube {

Error NdjsonDecoder::TooLong(std::size_t bytes, bool complete) const {
  return MakeError(ErrorCode::kInternal,
                   std::string(complete ? "a line of " : "an unfinished line of already ") +
                       std::to_string(bytes) + " bytes exceeds the limit of " +
                       std::to_string(max_line_bytes_) +
                       " bytes per newline-delimited JSON line (NdjsonDecoder max_line_bytes)");
}

Result<std::optional<std::string>> NdjsonDecoder::NextLine() {
  while (true) {
    const std::size_t newline = buffer_.find('\n', consumed_);
    if (newline == std::string::npos) {
      // Drop what was consumed so the buffer holds only the partial line.
      buffer_.erase(0, consumed_);
      consumed_ = 0;
      if (buffer_.size() > max_line_bytes_) return TooLong(buffer_.size(), /*complete=*/false);
      return std::optional<std::string>();
    }
    std::size_t end = newline;
    if (end > consumed_ && buffer_[end - 1] == '\r') --end;
    if (end - consumed_ > max_line_bytes_) return TooLong(end - consumed_, /*complete=*/true);
    std::string line = buffer_.substr(consumed_, end - consumed_);
    consumed_ = newline + 1;
    if (line.find_first_not_of(" \t") != std::string::npos) {
      return std::optional<std::string>(std::move(line));
    }
  }
}

}  // namespace fulcrum::kube
