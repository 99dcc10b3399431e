#include "tests/tools/local_node/runtime/container_spec.h"

namespace fulcrum::local_node {
namespace {

Result<std::vector<std::string>> StringList(const nlohmann::json& json, const char* key) {
  const auto found = json.find(key);
  if (found == json.end()) return std::vector<std::string>{};
  if (!found->is_array()) return InvalidArgument(key, "must be a list of strings");
  std::vector<std::string> values;
  for (const auto& item : *found) {
    if (!item.is_string()) return InvalidArgument(key, "must be a list of strings");
    values.push_back(item.get<std::string>());
  }
  return values;
}

}  // namespace

nlohmann::json ToJson(const ContainerSpec& spec) {
  nlohmann::json mounts = nlohmann::json::array();
  for (const BindMount& mount : spec.mounts) {
    mounts.push_back({{"source", mount.source.string()},
                      {"target", mount.target},
                      {"readOnly", mount.read_only}});
  }
  return {{"argv", spec.argv},
          {"env", spec.env},
          {"workingDir", spec.working_dir},
          {"mounts", mounts},
          {"logFile", spec.log_file},
          {"messageFromLogOnError", spec.message_from_log_on_error}};
}

Result<ContainerSpec> ContainerSpecFromJson(const nlohmann::json& json) try {
  if (!json.is_object()) return InvalidArgument("spec", "must be a JSON object");
  ContainerSpec spec;
  auto argv = StringList(json, "argv");
  if (!argv.ok()) return argv.error();
  spec.argv = std::move(argv).value();
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return InvalidArgument("argv", "must start with an absolute path to the program");
  }
  auto env = StringList(json, "env");
  if (!env.ok()) return env.error();
  spec.env = std::move(env).value();
  spec.working_dir = json.value("workingDir", "");
  spec.log_file = json.value("logFile", "");
  spec.message_from_log_on_error = json.value("messageFromLogOnError", false);
  if (spec.log_file.empty())
    return InvalidArgument("logFile", "must name the file for stdout and stderr");
  if (const auto mounts = json.find("mounts"); mounts != json.end()) {
    if (!mounts->is_array()) return InvalidArgument("mounts", "must be a list");
    for (const auto& item : *mounts) {
      BindMount mount;
      mount.source = item.value("source", "");
      mount.target = item.value("target", "");
      mount.read_only = item.value("readOnly", false);
      if (mount.source.empty() || mount.target.empty() || mount.target[0] != '/') {
        return InvalidArgument("mounts", "each mount needs a source and an absolute target");
      }
      spec.mounts.push_back(std::move(mount));
    }
  }
  return spec;
} catch (const nlohmann::json::exception& error) {  // a value of the wrong type
  return InvalidArgument("spec", error.what());
}

}  // namespace fulcrum::local_node
