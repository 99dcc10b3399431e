// The files of a secret, configMap, downwardAPI or projected volume, and how
// they are put on disk: the payload owns its directory, so a re-run replaces
// changed files (each written to a temporary name, then renamed over the old
// one, so a reader never sees a half-written file) and removes files that left
// the payload. Kubelet's AtomicWriter swaps a whole `..data` symlink instead,
// which also makes several files change together; plain files are enough here
// and keep subPath mounts of single keys simple.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "common/result.h"

namespace fulcrum::local_node {

struct PayloadFile {
  std::string content;
  std::filesystem::perms mode = std::filesystem::perms::none;
};

// Relative, cleaned path -> file. A later projection of the same path replaces
// an earlier one, as in kubelet's projected volumes.
using Payload = std::map<std::string, PayloadFile>;

// A path for the payload, checked as kubelet's AtomicWriter does (not empty, not
// absolute, no `..` element, not starting with `..`, which kubelet reserves) and
// then cleaned ("a//b/" -> "a/b"). kInvalidArgument naming `field`.
Result<std::string> CleanPayloadPath(const std::string& path, const std::string& field);

// Makes `directory` hold exactly `payload`. A path that is both a file and a
// parent of another ("a" and "a/b") is kInvalidArgument naming `field`; a file
// system failure is kInternal.
Result<void> WritePayload(const std::filesystem::path& directory, const Payload& payload,
                          const std::string& field);

}  // namespace fulcrum::local_node
