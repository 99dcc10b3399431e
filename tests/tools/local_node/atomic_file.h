// Writing a file so that a reader sees the old content or the new, never half of either,
// even if the writer is killed mid-way: the content goes to a temporary name in the same
// folder, then is renamed over the target. The agent's state files, the emulated-slowdown
// files its trainers poll, and volume files all need this.
#pragma once

#include <filesystem>
#include <string_view>

#include "common/result.h"

namespace fulcrum::local_node {

// Creates the parent folders as needed. The temporary is "..<name>.tmp" beside the target
// (a name no volume payload path can have). kInternal naming the file on failure.
Status WriteFileAtomically(const std::filesystem::path& target, std::string_view content,
                           std::filesystem::perms mode = std::filesystem::perms::owner_read |
                                                         std::filesystem::perms::owner_write |
                                                         std::filesystem::perms::group_read |
                                                         std::filesystem::perms::others_read);

}  // namespace fulcrum::local_node
