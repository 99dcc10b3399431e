#include "operator/controller/shared_storage.h"

#include <array>
#include <filesystem>

namespace fulcrum::controller {
namespace {

constexpr std::array<const char*, 5> kSharedSources = {"persistentVolumeClaim", "nfs", "cephfs",
                                                       "glusterfs", "azureFile"};

// `path` made absolute-normal without a trailing slash ("/data/" and "/data/." read "/data").
std::string Normal(const std::string& path) {
  std::string normal = std::filesystem::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// Whether `path` is `directory` or lies under it, by whole path components.
bool Under(const std::string& path, const std::string& directory) {
  const std::string file = Normal(path);
  const std::string mount = Normal(directory);
  if (mount == "/") return true;
  return file == mount || file.starts_with(mount + "/");
}

std::string SourceOf(const nlohmann::json& volume) {
  for (const auto& [key, value] : volume.items()) {
    if (key != "name") return key;
  }
  return "";
}

std::string Check(const JobSpec& spec, const std::string& path) {
  const PodTemplate& pod = spec.pod_template;
  const nlohmann::json* mount = nullptr;
  std::size_t longest = 0;
  for (const nlohmann::json& candidate : pod.volume_mounts) {
    const std::string directory = Normal(candidate.value("mountPath", ""));
    if (!directory.empty() && Under(path, directory) && directory.size() >= longest) {
      mount = &candidate;  // the deepest mount holds the path
      longest = directory.size();
    }
  }
  if (mount == nullptr) {
    return path +
           " is on no volume: it lives in the trainer's container and is lost with it (a "
           "suspended job would resume from step 0); mount a PersistentVolumeClaim in "
           "spec.template and put the path under its mountPath";
  }
  const std::string name = mount->value("name", "");
  const std::string mount_path = mount->value("mountPath", "");
  const nlohmann::json* volume = nullptr;
  for (const nlohmann::json& candidate : pod.volumes) {
    if (candidate.value("name", "") == name) volume = &candidate;
  }
  if (volume == nullptr)
    return path + " is under the mount of volume " + name + ", which the template does not have";
  if (!SharedVolumeSource(*volume)) {
    return path + " is on volume " + name + " (" + SourceOf(*volume) +
           "), which each pod has on its own node: workers on other nodes, and pods that "
           "replace them, do not see it; use a PersistentVolumeClaim (or nfs) for it";
  }
  const bool claim_read_only = volume->contains("persistentVolumeClaim") &&
                               (*volume)["persistentVolumeClaim"].value("readOnly", false);
  if (mount->value("readOnly", false) || claim_read_only) {
    return path + " is on volume " + name + ", mounted read-only at " + mount_path +
           ": the trainers cannot write there; mount it read-write";
  }
  return "";
}

}  // namespace

bool SharedVolumeSource(const nlohmann::json& volume) {
  for (const char* source : kSharedSources) {
    if (volume.contains(source)) return true;
  }
  return false;
}

std::vector<StorageProblem> UnsharedPaths(const JobSpec& spec) {
  std::vector<StorageProblem> problems;
  const std::pair<const char*, const std::string*> paths[] = {
      {"spec.checkpoint.path", &spec.checkpoint_path}, {"spec.output.path", &spec.output_path}};
  for (const auto& [field, path] : paths) {
    if (path->empty()) continue;
    if (std::string message = Check(spec, *path); !message.empty()) {
      problems.push_back({field, field + std::string(": ") + message});
    }
  }
  return problems;
}

}  // namespace fulcrum::controller
