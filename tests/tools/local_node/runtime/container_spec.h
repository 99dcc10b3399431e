// One start of one container, as the agent hands it to the shim that runs it:
// the resolved command line, environment, working directory, bind mounts and
// log file. Also the names of the files in a start's state folder, the contract
// between agent and shim (docs/local-node.md, "State on disk").
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"
#include "tests/tools/local_node/podspec/volumes.h"

namespace fulcrum::local_node {

struct ContainerSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path
  std::vector<std::string> env;   // "NAME=value"
  std::string working_dir;
  std::vector<BindMount> mounts;
  std::string log_file;  // stdout and stderr, appended
  // terminationMessagePolicy FallbackToLogsOnError: a container that fails gets the tail of its
  // log as its termination message, as kubelet does (this runtime has no termination-log file).
  bool message_from_log_on_error = false;
};

nlohmann::json ToJson(const ContainerSpec& spec);
// The shim reads the spec from a file: checked, errors name the key.
Result<ContainerSpec> ContainerSpecFromJson(const nlohmann::json& json);

// Files in the state folder of one container start.
namespace state_file {
inline constexpr const char* kSpec = "spec.json";        // agent -> shim: ContainerSpec
inline constexpr const char* kShim = "shim.json";        // agent: {pid, start_ticks} of the shim
inline constexpr const char* kStarted = "started.json";  // shim: {pid, started_at} of the container
inline constexpr const char* kExit = "exit.json";        // shim: how it ended (ContainerExit)
inline constexpr const char* kShimLog = "shim.log";      // the shim's own stderr
}  // namespace state_file

}  // namespace fulcrum::local_node
