// The node inventory: which emulated GPU nodes the agent plays kubelet for.
// The same YAML as tests/cluster/nodes/*.yaml (groups of `count` nodes named
// `namePrefix-N` with a GPU product, its memory in MiB and count), plus
// `emulatedSlowdown` per group: the factor by which the node's trainers slow
// their compute to emulate a slower GPU (label fulcrum.dev/emulated-slowdown).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::local_node {

// The label that tells the node agent (not kwok) manages a node.
inline constexpr const char* kManagedByLabel = "fulcrum.dev/fake-node";
inline constexpr const char* kManagedByValue = "local";
inline constexpr const char* kSlowdownLabel = "fulcrum.dev/emulated-slowdown";

struct NodeSpec {
  std::string name;
  std::map<std::string, std::string> labels;    // GFD labels, hostname/os/arch, ours
  std::map<std::string, std::string> capacity;  // cpu, memory, pods, nvidia.com/gpu
  std::string slowdown = "1";                   // the label's initial value
};

// Parses and checks an inventory; errors name the file and the field
// (`nodes[1].gpu.memoryMiB`) and say what is expected. Node names must be unique.
Result<std::vector<NodeSpec>> ParseInventory(const std::string& yaml_text,
                                             const std::string& file_name);
Result<std::vector<NodeSpec>> LoadInventory(const std::string& path);

// A slowdown label value: a finite number >= 1 ("1", "2.5"). Errors say so.
Result<double> ParseSlowdown(const std::string& text);

}  // namespace fulcrum::local_node
