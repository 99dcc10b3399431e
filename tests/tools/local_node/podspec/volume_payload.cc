#include "tests/tools/local_node/podspec/volume_payload.h"

#include <set>
#include <string_view>
#include <system_error>
#include <vector>

#include "tests/tools/local_node/atomic_file.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;

Error FileSystemError(const std::string& action, const fs::path& path, const std::error_code& error,
                      const std::string& field) {
  return Error{ErrorCode::kInternal, action + " " + path.string() + ": " + error.message(), field};
}

// Every directory the payload needs: "a/b/c" needs "a" and "a/b".
std::set<std::string, std::less<>> ParentDirectories(const Payload& payload) {
  std::set<std::string, std::less<>> directories;
  for (const auto& [path, file] : payload) {
    for (std::size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      directories.insert(path.substr(0, slash));
    }
  }
  return directories;
}

// Removes whatever under `directory` the payload does not name: files of keys
// that are gone, and anything whose kind changed (a file that must now be a
// directory, or the reverse), so that the renames that follow cannot fail on it.
Result<void> RemoveStaleEntries(const fs::path& directory, const std::string& relative_prefix,
                                const Payload& payload,
                                const std::set<std::string, std::less<>>& directories,
                                const std::string& field) {
  std::error_code error;
  std::vector<fs::directory_entry> entries;
  for (fs::directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    entries.push_back(*it);
  }
  if (error) return FileSystemError("listing", directory, error, field);
  for (const fs::directory_entry& entry : entries) {
    const std::string relative = relative_prefix + entry.path().filename().string();
    const fs::file_status status = entry.symlink_status(error);
    if (error) return FileSystemError("inspecting", entry.path(), error, field);
    if (fs::is_directory(status) && directories.contains(relative)) {
      if (Result<void> pruned =
              RemoveStaleEntries(entry.path(), relative + "/", payload, directories, field);
          !pruned.ok()) {
        return pruned;
      }
      continue;
    }
    if (fs::is_regular_file(status) && payload.contains(relative)) continue;
    fs::remove_all(entry.path(), error);
    if (error) return FileSystemError("removing", entry.path(), error, field);
  }
  return Ok();
}

}  // namespace

Result<std::string> CleanPayloadPath(const std::string& path, const std::string& field) {
  const std::string fix = "; use a relative path inside the volume, e.g. \"config/app.yaml\"";
  if (path.empty()) return InvalidArgument(field, "is empty" + fix);
  if (path.front() == '/') return InvalidArgument(field, "\"" + path + "\" is absolute" + fix);
  for (const fs::path& element : fs::path(path)) {
    if (element == "..") return InvalidArgument(field, "\"" + path + "\" contains '..'" + fix);
  }
  if (path.starts_with("..")) {
    return InvalidArgument(field,
                           "\"" + path + "\" starts with '..', which kubelet reserves" + fix);
  }
  std::string cleaned = fs::path(path).lexically_normal().generic_string();
  while (!cleaned.empty() && cleaned.back() == '/') cleaned.pop_back();
  if (cleaned.empty() || cleaned == ".") {
    return InvalidArgument(field, "\"" + path + "\" names the volume itself" + fix);
  }
  return cleaned;
}

Result<void> WritePayload(const fs::path& directory, const Payload& payload,
                          const std::string& field) {
  const std::set<std::string, std::less<>> directories = ParentDirectories(payload);
  for (const auto& [path, file] : payload) {
    if (directories.contains(path)) {
      return InvalidArgument(field, "\"" + path +
                                        "\" is both a file and a directory of other files; give "
                                        "the items distinct paths");
    }
  }
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) return FileSystemError("creating", directory, error, field);
  if (Result<void> pruned = RemoveStaleEntries(directory, "", payload, directories, field);
      !pruned.ok()) {
    return pruned;
  }
  for (const auto& [path, file] : payload) {
    if (Status written = WriteFileAtomically(directory / path, file.content, file.mode);
        !written.ok()) {
      return Error{written.error().code, written.error().message, field};
    }
  }
  return Ok();
}

}  // namespace fulcrum::local_node
