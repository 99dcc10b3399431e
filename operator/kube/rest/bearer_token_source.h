// The bearer token to send, re-read from its file when the file changes:
// projected service-account tokens rotate (kubelet rewrites the file roughly
// hourly), and a client holding the old one would start failing with 401.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>

namespace fulcrum::kube {

class BearerTokenSource {
 public:
  // `file` empty: always `token`. Otherwise the file wins (as in client-go),
  // with `token` being its last known content.
  BearerTokenSource(std::string token, std::filesystem::path file);

  // The current token; re-reads the file if its modification time or size
  // changed since the last read. Keeps the old token if the file is
  // momentarily unreadable (kubelet swaps it by rename).
  std::string Current();

 private:
  std::mutex mutex_;
  std::string token_;
  const std::filesystem::path file_;
  std::filesystem::file_time_type seen_mtime_{};
  std::uintmax_t seen_size_ = 0;
};

// The token in a token file: its content without trailing whitespace.
std::string TrimTrailingWhitespace(std::string text);

}  // namespace fulcrum::kube
