#include "tests/tools/local_node/node/slowdown_files.h"

#include <fstream>

namespace fulcrum::local_node {

std::filesystem::path SlowdownFiles::PathFor(const std::string& node) const {
  return work_dir_ / "nodes" / node / "emulated-slowdown";
}

Status SlowdownFiles::Write(const std::string& node, const std::string& value) const {
  const std::filesystem::path path = PathFor(node);
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << value << "\n";
    if (!out) return MakeError(ErrorCode::kInternal, "cannot write " + temporary.string());
  }
  // A trainer reading while we write sees the old value or the new one.
  std::filesystem::rename(temporary, path, error);
  if (error)
    return MakeError(ErrorCode::kInternal,
                     "cannot replace " + path.string() + ": " + error.message());
  return Ok();
}

}  // namespace fulcrum::local_node
