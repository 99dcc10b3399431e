#include "tests/tools/local_node/runtime/command_lookup.h"

#include <unistd.h>

#include <sstream>

namespace fulcrum::local_node {
namespace {

bool IsExecutableFile(const std::filesystem::path& path) {
  std::error_code error;
  return std::filesystem::is_regular_file(path, error) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string ImageEntrypoint(const std::string& image) {
  std::string name = image.substr(0, image.find('@'));  // drop a digest
  if (const auto slash = name.rfind('/'); slash != std::string::npos) name = name.substr(slash + 1);
  return name.substr(0, name.find(':'));  // drop a tag (after the last slash, a ':' is one)
}

Result<std::filesystem::path> FindProgram(const std::string& program,
                                          const std::vector<std::filesystem::path>& search_dirs,
                                          const std::string& path_variable) {
  if (program.empty())
    return MakeError(ErrorCode::kNotFound, "the container has no command and no image to run");
  if (program.find('/') != std::string::npos) {
    const std::filesystem::path path = std::filesystem::absolute(program);
    if (IsExecutableFile(path)) return path;
    return MakeError(ErrorCode::kNotFound, "executable file \"" + program + "\" not found");
  }
  std::vector<std::filesystem::path> dirs = search_dirs;
  std::stringstream path_dirs(path_variable);
  for (std::string dir; std::getline(path_dirs, dir, ':');) {
    if (!dir.empty()) dirs.emplace_back(dir);
  }
  for (const auto& dir : dirs) {
    if (IsExecutableFile(dir / program)) return std::filesystem::absolute(dir / program);
  }
  std::string looked;
  for (const auto& dir : search_dirs) looked += (looked.empty() ? "" : ", ") + dir.string();
  return MakeError(ErrorCode::kNotFound,
                   "executable file \"" + program + "\" not found in --path (" +
                       (looked.empty() ? "none given" : looked) +
                       ") or in the agent's PATH; build it or give the folder with --path");
}

}  // namespace fulcrum::local_node
