#include "tests/tools/local_node/node/slowdown_files.h"

#include "tests/tools/local_node/atomic_file.h"

namespace fulcrum::local_node {

std::filesystem::path SlowdownFiles::PathFor(const std::string& node) const {
  return work_dir_ / "nodes" / node / "emulated-slowdown";
}

Status SlowdownFiles::Write(const std::string& node, const std::string& value) const {
  // A trainer reading while we write sees the old value or the new one.
  return WriteFileAtomically(PathFor(node), value + "\n");
}

}  // namespace fulcrum::local_node
