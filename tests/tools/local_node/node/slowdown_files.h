// The file through which a node's emulated slowdown reaches its trainers: the
// agent writes the node label fulcrum.dev/emulated-slowdown there, and rewrites
// it when the label changes; every container gets the path in
// FULCRUM_SLOWDOWN_FILE, and fulcrum-trainer re-reads it every step. Emulation
// only: no GPU is slowed, a CPU process sleeps in proportion to its compute.
#pragma once

#include <filesystem>
#include <string>

#include "common/result.h"

namespace fulcrum::local_node {

class SlowdownFiles {
 public:
  explicit SlowdownFiles(std::filesystem::path work_dir) : work_dir_(std::move(work_dir)) {}
  std::filesystem::path PathFor(const std::string& node) const;
  // Writes `value` (already checked by ParseSlowdown) atomically.
  Status Write(const std::string& node, const std::string& value) const;

 private:
  std::filesystem::path work_dir_;
};

}  // namespace fulcrum::local_node
