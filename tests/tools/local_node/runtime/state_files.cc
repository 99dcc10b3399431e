#include "tests/tools/local_node/runtime/state_files.h"

#include <fstream>
#include <sstream>

#include "tests/tools/local_node/atomic_file.h"

namespace fulcrum::local_node {

Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& value) {
  return WriteFileAtomically(path, value.dump() + "\n");
}

Result<std::optional<nlohmann::json>> ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::optional<nlohmann::json>{};
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json value = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return MakeError(ErrorCode::kInternal, path.string() + " is not valid JSON");
  }
  return std::optional<nlohmann::json>(std::move(value));
}

}  // namespace fulcrum::local_node
