// Small JSON files that the agent and its shims hand each other through the
// disk, so that a restarted agent finds what its predecessor started. Written
// atomically (temporary file, then rename): a reader sees the old file or the
// new one, never half of one, even if the writer is killed mid-way.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/result.h"

namespace fulcrum::local_node {

Status WriteJsonFile(const std::filesystem::path& path, const nlohmann::json& value);
// nullopt when the file does not exist; an error naming the file when it is not JSON.
Result<std::optional<nlohmann::json>> ReadJsonFile(const std::filesystem::path& path);

}  // namespace fulcrum::local_node
