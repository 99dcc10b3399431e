// Where a container's program comes from, since no image is pulled: command[0]
// is looked up in the agent's --path folders (the build's binaries) first, then
// in the agent's own PATH (so `sh -c ...` works). A pod without `command` runs
// its image's entrypoint, which this agent takes to be the image's name without
// registry, tag or digest ("localhost/fulcrum-trainer:0.1" -> "fulcrum-trainer").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::local_node {

// The entrypoint of an image reference, as above; empty for an empty image.
std::string ImageEntrypoint(const std::string& image);

// The absolute path of `program`: itself if it holds a '/' and is executable;
// else the first executable `dir/program` in `search_dirs` then in `path_variable`
// (colon-separated). kNotFound with a message naming the program and where it looked.
Result<std::filesystem::path> FindProgram(const std::string& program,
                                          const std::vector<std::filesystem::path>& search_dirs,
                                          const std::string& path_variable);

}  // namespace fulcrum::local_node
