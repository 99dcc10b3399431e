#include "tests/tools/local_node/runtime/state_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fulcrum::local_node {

Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& value) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  const std::string text = value.dump() + "\n";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot write " + temporary.string() + ": " + std::strerror(errno));
  }
  const ssize_t written = ::write(fd, text.data(), text.size());
  ::close(fd);
  if (written != static_cast<ssize_t>(text.size())) {
    return MakeError(ErrorCode::kInternal, "short write to " + temporary.string());
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return MakeError(ErrorCode::kInternal,
                     "cannot rename " + temporary.string() + ": " + std::strerror(errno));
  }
  return Ok();
}

Result<std::optional<nlohmann::json>> ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::optional<nlohmann::json>{};
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json value = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return MakeError(ErrorCode::kInternal, path.string() + " is not valid JSON");
  }
  return std::optional<nlohmann::json>(std::move(value));
}

}  // namespace fulcrum::local_node
