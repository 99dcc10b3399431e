#include "tests/tools/local_node/atomic_file.h"

#include <fstream>

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;

Error FileSystemError(const std::string& action, const fs::path& path,
                      const std::error_code& error) {
  return MakeError(ErrorCode::kInternal, action + " " + path.string() + ": " + error.message());
}

}  // namespace

Status WriteFileAtomically(const fs::path& target, std::string_view content, fs::perms mode) {
  std::error_code error;
  fs::create_directories(target.parent_path(), error);
  if (error) return FileSystemError("creating", target.parent_path(), error);
  const fs::path temporary = target.parent_path() / (".." + target.filename().string() + ".tmp");
  fs::remove(temporary, error);  // a leftover of an interrupted run may be read-only
  {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    stream.write(content.data(), static_cast<std::streamsize>(content.size()));
    stream.close();
    if (!stream)
      return MakeError(ErrorCode::kInternal, "writing " + temporary.string() + " failed");
  }
  fs::permissions(temporary, mode, fs::perm_options::replace, error);
  if (error) return FileSystemError("setting the mode of", temporary, error);
  fs::rename(temporary, target, error);
  if (error) return FileSystemError("renaming into place", target, error);
  return Ok();
}

}  // namespace fulcrum::local_node
