#include "operator/kube/rest/bearer_token_source.h"

#include <cctype>
#include <fstream>
#include <sstream>

namespace fulcrum::kube {

std::string TrimTrailingWhitespace(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

BearerTokenSource::BearerTokenSource(std::string token, std::filesystem::path file)
    : token_(std::move(token)), file_(std::move(file)) {}

std::string BearerTokenSource::Current() {
  std::lock_guard lock(mutex_);
  if (file_.empty()) return token_;
  std::error_code error;
  const auto mtime = std::filesystem::last_write_time(file_, error);
  if (error) return token_;
  const auto size = std::filesystem::file_size(file_, error);
  if (error || (mtime == seen_mtime_ && size == seen_size_)) return token_;
  std::ifstream in(file_, std::ios::binary);
  std::ostringstream contents;
  contents << in.rdbuf();
  std::string fresh = TrimTrailingWhitespace(contents.str());
  if (in && !fresh.empty()) {
    token_ = std::move(fresh);
    seen_mtime_ = mtime;
    seen_size_ = size;
  }
  return token_;
}

}  // namespace fulcrum::kube
