#include "tests/tools/local_node/podspec/volumes.h"

#include <cstdint>
#include <fstream>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "tests/tools/local_node/podspec/downward_api.h"
#include "tests/tools/local_node/podspec/expansion.h"
#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/podspec/referenced_data.h"
#include "tests/tools/local_node/podspec/volume_payload.h"

namespace fulcrum::local_node {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSupportedVolumeTypes =
    "secret, configMap, downwardAPI, projected (secret, configMap, downwardAPI, "
    "serviceAccountToken), emptyDir, hostPath, persistentVolumeClaim (bound to a hostPath or "
    "local PersistentVolume)";
// The API server's defaults, for objects written by hand without them.
constexpr fs::perms kDefaultMode = static_cast<fs::perms>(0644);
constexpr std::int64_t kDefaultTokenExpirationSeconds = 3600;

// What every projection needs to know about the pod it projects for.
struct ProjectionContext {
  const nlohmann::json& pod;
  const PodRuntimeFacts& facts;
  PodReferences& references;
  std::string ns;
};

Result<fs::perms> ModeMember(const nlohmann::json& object, std::string_view key, fs::perms fallback,
                             const std::string& field) {
  if (Member(object, key) == nullptr) return fallback;
  std::optional<std::int64_t> mode = IntegerMember(object, key);
  if (!mode || *mode < 0 || *mode > 0777) {
    return InvalidArgument(
        field, "must be a file mode between 0 and 0777 (decimal 0 to 511), e.g. 420 for 0644");
  }
  return static_cast<fs::perms>(*mode);
}

// The keys of a Secret or ConfigMap as files: all keys by name, or the listed
// items at their paths (secret and configMap volumes, and those projections).
Result<void> ProjectKeys(ProjectionContext& context, const nlohmann::json& source,
                         ReferencedKind kind, std::string_view name_member, fs::perms default_mode,
                         const std::string& field, Payload& payload) {
  const std::string name = StringMember(source, name_member);
  const bool optional = BoolMember(source, "optional");
  Result<std::optional<ReferencedEntries>> entries = ReadReferencedEntries(
      context.references, kind, context.ns, name, optional, /*include_binary_data=*/true, field);
  if (!entries.ok()) return entries.error();
  if (!entries->has_value()) return Ok();  // optional and absent: kubelet leaves the volume empty
  const ReferencedEntries& data = **entries;

  const nlohmann::json& items = ArrayMember(source, "items");
  if (items.empty()) {
    for (const auto& [key, value] : data) {
      Result<std::string> path = CleanPayloadPath(key, field);
      if (!path.ok()) return path.error();
      payload.insert_or_assign(*path, PayloadFile{value, default_mode});
    }
    return Ok();
  }
  for (std::size_t j = 0; j < items.size(); ++j) {
    const std::string item_field = field + ".items[" + std::to_string(j) + "]";
    const std::string key = StringMember(items[j], "key");
    if (key.empty())
      return InvalidArgument(item_field + ".key", "is required; name the key to project");
    Result<std::string> path =
        CleanPayloadPath(StringMember(items[j], "path"), item_field + ".path");
    if (!path.ok()) return path.error();
    Result<fs::perms> mode = ModeMember(items[j], "mode", default_mode, item_field + ".mode");
    if (!mode.ok()) return mode.error();
    auto found = data.find(key);
    if (found == data.end()) {
      if (optional) continue;
      return MissingKeyError(kind, context.ns, name, key, item_field);
    }
    payload.insert_or_assign(*path, PayloadFile{found->second, *mode});
  }
  return Ok();
}

Result<void> ProjectDownwardApi(ProjectionContext& context, const nlohmann::json& source,
                                fs::perms default_mode, const std::string& field,
                                Payload& payload) {
  const nlohmann::json& items = ArrayMember(source, "items");
  for (std::size_t j = 0; j < items.size(); ++j) {
    const std::string item_field = field + ".items[" + std::to_string(j) + "]";
    Result<std::string> path =
        CleanPayloadPath(StringMember(items[j], "path"), item_field + ".path");
    if (!path.ok()) return path.error();
    Result<fs::perms> mode = ModeMember(items[j], "mode", default_mode, item_field + ".mode");
    if (!mode.ok()) return mode.error();
    const nlohmann::json* field_ref = Member(items[j], "fieldRef");
    const nlohmann::json* resource_field_ref = Member(items[j], "resourceFieldRef");
    if ((field_ref == nullptr) == (resource_field_ref == nullptr)) {
      return InvalidArgument(item_field, "must set exactly one of fieldRef and resourceFieldRef");
    }
    Result<std::string> value =
        field_ref != nullptr
            ? ResolveFieldSelector(context.pod, *field_ref, context.facts,
                                   /*allow_whole_maps=*/true, item_field + ".fieldRef")
            : ResolveResourceFieldRef(context.pod, *resource_field_ref,
                                      /*default_container=*/nullptr,
                                      item_field + ".resourceFieldRef");
    if (!value.ok()) return value.error();
    payload.insert_or_assign(*path, PayloadFile{std::move(*value), *mode});
  }
  return Ok();
}

Result<void> ProjectServiceAccountToken(ProjectionContext& context, const nlohmann::json& source,
                                        fs::perms default_mode, const std::string& field,
                                        Payload& payload) {
  Result<std::string> path = CleanPayloadPath(StringMember(source, "path"), field + ".path");
  if (!path.ok()) return path.error();
  // An empty audience means the API server's own audiences, which TokenRequest takes as none given.
  std::vector<std::string> audiences;
  if (std::string audience = StringMember(source, "audience"); !audience.empty()) {
    audiences.push_back(std::move(audience));
  }
  const std::int64_t expiration =
      IntegerMember(source, "expirationSeconds").value_or(kDefaultTokenExpirationSeconds);
  std::string service_account =
      StringMember(ObjectMember(context.pod, "spec"), "serviceAccountName");
  if (service_account.empty()) service_account = "default";
  const nlohmann::json& metadata = ObjectMember(context.pod, "metadata");
  Result<std::string> token = context.references.ServiceAccountToken(
      context.ns, service_account, audiences, expiration, StringMember(metadata, "name"),
      StringMember(metadata, "uid"));
  if (!token.ok()) {
    const ErrorCode code = token.error().code == ErrorCode::kNotFound
                               ? ErrorCode::kFailedPrecondition
                               : token.error().code;
    return Error{code,
                 "requesting a token for ServiceAccount " + context.ns + "/" + service_account +
                     ": " + token.error().message,
                 field};
  }
  // Kubelet writes the token with defaultMode too (0600 only when fsGroup/fsUser apply, not here).
  payload.insert_or_assign(*path, PayloadFile{std::move(*token), default_mode});
  return Ok();
}

Result<void> ProjectSources(ProjectionContext& context, const nlohmann::json& projected,
                            fs::perms default_mode, const std::string& field, Payload& payload) {
  const nlohmann::json& sources = ArrayMember(projected, "sources");
  for (std::size_t j = 0; j < sources.size(); ++j) {
    const std::string source_field = field + ".sources[" + std::to_string(j) + "]";
    const nlohmann::json& source = sources[j];
    Result<void> projected_source = Ok();
    if (const nlohmann::json* secret = Member(source, "secret")) {
      projected_source = ProjectKeys(context, *secret, ReferencedKind::kSecret, "name",
                                     default_mode, source_field + ".secret", payload);
    } else if (const nlohmann::json* config_map = Member(source, "configMap")) {
      projected_source = ProjectKeys(context, *config_map, ReferencedKind::kConfigMap, "name",
                                     default_mode, source_field + ".configMap", payload);
    } else if (const nlohmann::json* downward_api = Member(source, "downwardAPI")) {
      projected_source = ProjectDownwardApi(context, *downward_api, default_mode,
                                            source_field + ".downwardAPI", payload);
    } else if (const nlohmann::json* token = Member(source, "serviceAccountToken")) {
      projected_source = ProjectServiceAccountToken(context, *token, default_mode,
                                                    source_field + ".serviceAccountToken", payload);
    } else {
      const std::string kind =
          source.is_object() && !source.empty() ? source.begin().key() : "(none)";
      return InvalidArgument(source_field,
                             "projection \"" + kind +
                                 "\" is not supported by fulcrum-local-node; use secret, "
                                 "configMap, downwardAPI or serviceAccountToken");
    }
    if (!projected_source.ok()) return projected_source;
  }
  return Ok();
}

// The files of a secret, configMap, downwardAPI or projected volume.
Result<Payload> CollectPayload(ProjectionContext& context, std::string_view type,
                               const nlohmann::json& source, const std::string& field) {
  Result<fs::perms> default_mode =
      ModeMember(source, "defaultMode", kDefaultMode, field + ".defaultMode");
  if (!default_mode.ok()) return default_mode.error();
  Payload payload;
  Result<void> collected = Ok();
  if (type == "secret") {
    collected = ProjectKeys(context, source, ReferencedKind::kSecret, "secretName", *default_mode,
                            field, payload);
  } else if (type == "configMap") {
    collected = ProjectKeys(context, source, ReferencedKind::kConfigMap, "name", *default_mode,
                            field, payload);
  } else if (type == "downwardAPI") {
    collected = ProjectDownwardApi(context, source, *default_mode, field, payload);
  } else {
    collected = ProjectSources(context, source, *default_mode, field, payload);
  }
  if (!collected.ok()) return collected.error();
  return payload;
}

// Checked before anything is created there: a relative path would be the agent's own folder.
Error NotAbsolute(const std::string& field, const fs::path& path) {
  return InvalidArgument(field, "\"" + path.string() + "\" must be an absolute path on the host");
}

// hostPath's `type`, checked (and for the *OrCreate types, created) as kubelet's
// hostPath plugin does. Symlinks are followed, as its os.Stat does.
Result<void> CheckHostPath(const fs::path& path, const std::string& type,
                           const std::string& field) {
  std::error_code error;
  const auto failed = [&](const std::string& what) {
    return Error{ErrorCode::kFailedPrecondition,
                 "hostPath type check failed: " + path.string() + " " + what +
                     "; create it on the host, or change the hostPath type",
                 field + ".type"};
  };
  if (type.empty()) return Ok();  // no check: kubelet mounts whatever is (or is not) there
  if (type == "DirectoryOrCreate") {
    if (!fs::exists(path, error)) {
      fs::create_directories(path, error);  // kubelet: MkdirAll with 0755 (less the umask)
      if (error) return failed("could not be created (" + error.message() + ")");
    }
    if (!fs::is_directory(path, error)) return failed("is not a directory");
    return Ok();
  }
  if (type == "FileOrCreate") {
    if (!fs::exists(path, error)) {
      // Like kubelet, do not create the parent: a missing parent fails the pod.
      std::ofstream created(path, std::ios::app);
      if (!created) return failed("could not be created (does its parent directory exist?)");
    }
    if (!fs::is_regular_file(path, error)) return failed("is not a file");
    return Ok();
  }
  struct ExistingType {
    std::string_view name;
    fs::file_type file_type;
    std::string_view mismatch;
  };
  constexpr ExistingType kExistingTypes[] = {
      {"Directory", fs::file_type::directory, "is not a directory"},
      {"File", fs::file_type::regular, "is not a file"},
      {"Socket", fs::file_type::socket, "is not a socket"},
      {"CharDevice", fs::file_type::character, "is not a character device"},
      {"BlockDevice", fs::file_type::block, "is not a block device"},
  };
  for (const ExistingType& expected : kExistingTypes) {
    if (type != expected.name) continue;
    const fs::file_type actual = fs::status(path, error).type();
    if (actual == fs::file_type::not_found || actual == fs::file_type::none)
      return failed("does not exist");
    if (actual != expected.file_type) return failed(std::string(expected.mismatch));
    return Ok();
  }
  return InvalidArgument(field + ".type",
                         "\"" + type +
                             "\" is not a hostPath type; use \"\", DirectoryOrCreate, "
                             "Directory, FileOrCreate, File, Socket, CharDevice or BlockDevice");
}

// A persistentVolumeClaim volume: the claim must be Bound (by kube-controller-manager's
// binder) to a PersistentVolume whose directory is on this host, a hostPath or a local
// volume; the pod then sees that directory, as kubelet bind-mounts it. An unbound claim is
// a FailedPrecondition (kubelet keeps such a pod ContainerCreating and retries).
Result<PreparedVolume> PrepareClaim(ProjectionContext& context, const nlohmann::json& source,
                                    const std::string& name, const std::string& field) {
  const std::string claim_name = StringMember(source, "claimName");
  if (claim_name.empty()) {
    return InvalidArgument(field + ".claimName", "is required; name the PersistentVolumeClaim");
  }
  const std::string claim_ref = "PersistentVolumeClaim " + context.ns + "/" + claim_name;
  const auto unavailable = [&](const std::string& why) {
    return Error{ErrorCode::kFailedPrecondition, claim_ref + " " + why, field + ".claimName"};
  };
  Result<nlohmann::json> claim = context.references.PersistentVolumeClaim(context.ns, claim_name);
  if (!claim.ok()) {
    if (claim.error().code == ErrorCode::kNotFound) return unavailable("does not exist; create it");
    return claim.error();
  }
  const std::string phase = StringMember(ObjectMember(*claim, "status"), "phase");
  const std::string volume_name = StringMember(ObjectMember(*claim, "spec"), "volumeName");
  if (phase != "Bound" || volume_name.empty()) {
    return unavailable("is " + (phase.empty() ? std::string("Pending") : phase) +
                       ", not bound to a PersistentVolume yet; create a PersistentVolume that "
                       "matches it (capacity, access modes, storageClassName)");
  }
  Result<nlohmann::json> volume = context.references.PersistentVolume(volume_name);
  if (!volume.ok()) {
    if (volume.error().code == ErrorCode::kNotFound) {
      return unavailable("is bound to PersistentVolume " + volume_name + ", which does not exist");
    }
    return volume.error();
  }
  const nlohmann::json& spec = ObjectMember(*volume, "spec");
  const std::string volume_field = "PersistentVolume " + volume_name + " spec";
  fs::path path;
  if (const nlohmann::json* host_path = Member(spec, "hostPath")) {
    path = StringMember(*host_path, "path");
    if (!path.is_absolute()) return NotAbsolute(volume_field + ".hostPath.path", path);
    if (Result<void> checked =
            CheckHostPath(path, StringMember(*host_path, "type"), volume_field + ".hostPath");
        !checked.ok()) {
      return checked.error();
    }
  } else if (const nlohmann::json* local = Member(spec, "local")) {
    path = StringMember(*local, "path");
    if (!path.is_absolute()) return NotAbsolute(volume_field + ".local.path", path);
    std::error_code error;
    if (!fs::exists(path, error)) {  // kubelet's local plugin mounts only what exists
      return Error{ErrorCode::kFailedPrecondition,
                   "local volume path " + path.string() + " does not exist on the host; create it",
                   volume_field + ".local.path"};
    }
  } else {
    return InvalidArgument(field + ".claimName",
                           claim_ref + " is bound to PersistentVolume " + volume_name +
                               ", which is neither hostPath nor local; fulcrum-local-node runs "
                               "pods as local processes and mounts only those");
  }
  return PreparedVolume{name, path, BoolMember(source, "readOnly")};
}

Result<PreparedVolume> PrepareVolume(ProjectionContext& context, const nlohmann::json& volume,
                                     const std::string& name, const fs::path& volumes_dir,
                                     const std::string& field) {
  std::string type;
  if (volume.is_object()) {
    for (const auto& [key, value] : volume.items()) {
      if (key != "name") {
        type = key;
        break;
      }
    }
  }
  const nlohmann::json& source = ObjectMember(volume, type);
  const std::string source_field = field + "." + type;
  const fs::path directory = volumes_dir / name;

  if (type == "secret" || type == "configMap" || type == "downwardAPI" || type == "projected") {
    Result<Payload> payload = CollectPayload(context, type, source, source_field);
    if (!payload.ok()) return payload.error();
    if (Result<void> written = WritePayload(directory, *payload, source_field); !written.ok()) {
      return written.error();
    }
    return PreparedVolume{name, directory, /*read_only=*/true};
  }
  if (type == "emptyDir") {
    // medium: Memory would be a tmpfs in kubelet; here it is a plain directory like
    // the default medium (an unprivileged agent cannot mount, and the contents are
    // small). Existing contents are kept: an emptyDir outlives container restarts.
    std::error_code error;
    fs::create_directories(directory, error);
    if (error) {
      return Error{ErrorCode::kInternal, "creating " + directory.string() + ": " + error.message(),
                   field};
    }
    return PreparedVolume{name, directory, /*read_only=*/false};
  }
  if (type == "hostPath") {
    const std::string path = StringMember(source, "path");
    if (!fs::path(path).is_absolute()) return NotAbsolute(source_field + ".path", path);
    if (Result<void> checked = CheckHostPath(path, StringMember(source, "type"), source_field);
        !checked.ok()) {
      return checked.error();
    }
    return PreparedVolume{name, fs::path(path), /*read_only=*/false};
  }
  if (type == "persistentVolumeClaim") return PrepareClaim(context, source, name, source_field);
  return InvalidArgument(field,
                         "type \"" + (type.empty() ? std::string("(none)") : type) +
                             "\" is not supported by fulcrum-local-node, which runs pods as local "
                             "processes; use one of " +
                             std::string(kSupportedVolumeTypes));
}

// Volume names become directory names: keep them to one path element.
bool IsSafeVolumeName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

Result<std::vector<PreparedVolume>> PrepareVolumes(const nlohmann::json& pod,
                                                   const PodRuntimeFacts& facts,
                                                   PodReferences& references,
                                                   const fs::path& pod_dir) {
  ProjectionContext context{pod, facts, references, PodNamespace(pod)};
  const fs::path volumes_dir = pod_dir / "volumes";
  std::vector<PreparedVolume> prepared;
  std::set<std::string, std::less<>> names;
  const nlohmann::json& volumes = ArrayMember(ObjectMember(pod, "spec"), "volumes");
  for (std::size_t i = 0; i < volumes.size(); ++i) {
    const std::string field = "spec.volumes[" + std::to_string(i) + "]";
    const std::string name = StringMember(volumes[i], "name");
    if (!IsSafeVolumeName(name)) {
      return InvalidArgument(field + ".name",
                             "\"" + name + "\" is not a volume name; use a DNS label");
    }
    if (!names.insert(name).second) {
      return InvalidArgument(field + ".name",
                             "\"" + name + "\" names two volumes; give each its own name");
    }
    Result<PreparedVolume> volume = PrepareVolume(context, volumes[i], name, volumes_dir, field);
    if (!volume.ok()) {
      Error error = volume.error();
      error.message = "volume \"" + name + "\": " + error.message;
      return error;
    }
    prepared.push_back(std::move(*volume));
  }
  return prepared;
}

Result<std::vector<BindMount>> ContainerMounts(const nlohmann::json& container,
                                               const std::string& field_prefix,
                                               const std::vector<PreparedVolume>& volumes,
                                               const std::vector<EnvVar>& environment) {
  std::vector<BindMount> mounts;
  const nlohmann::json& volume_mounts = ArrayMember(container, "volumeMounts");
  for (std::size_t i = 0; i < volume_mounts.size(); ++i) {
    const std::string field = field_prefix + ".volumeMounts[" + std::to_string(i) + "]";
    const nlohmann::json& mount = volume_mounts[i];
    const std::string name = StringMember(mount, "name");
    const std::string mount_path = StringMember(mount, "mountPath");
    if (mount_path.empty() || mount_path.front() != '/') {
      return InvalidArgument(field + ".mountPath",
                             "\"" + mount_path + "\" must be an absolute path");
    }
    const PreparedVolume* volume = nullptr;
    for (const PreparedVolume& candidate : volumes) {
      if (candidate.name == name) volume = &candidate;
    }
    if (volume == nullptr) {
      return InvalidArgument(
          field + ".name",
          "no volume named \"" + name + "\" in spec.volumes; add the volume or fix the name");
    }

    std::string sub_path = StringMember(mount, "subPath");
    const std::string sub_path_expr = StringMember(mount, "subPathExpr");
    if (!sub_path.empty() && !sub_path_expr.empty()) {
      return InvalidArgument(field, "sets both subPath and subPathExpr; keep one");
    }
    std::string sub_path_field = field + ".subPath";
    if (!sub_path_expr.empty()) {
      sub_path_field = field + ".subPathExpr";
      // As kubelet's ExpandContainerVolumeMounts: a variable that is undefined or
      // empty is an error, not left as `$(NAME)`.
      std::set<std::string, std::less<>> missing;
      sub_path =
          Expand(sub_path_expr, [&](std::string_view variable) -> std::optional<std::string> {
            for (auto it = environment.rbegin(); it != environment.rend(); ++it) {
              if (it->name == variable && !it->value.empty()) return it->value;
            }
            missing.emplace(variable);
            return std::string();
          });
      if (!missing.empty()) {
        std::string names;
        for (const std::string& variable : missing) names += (names.empty() ? "" : ", ") + variable;
        return InvalidArgument(sub_path_field,
                               "\"" + sub_path_expr + "\" refers to " + names +
                                   ", undefined or empty in the container's env; define it");
      }
    }

    fs::path source = volume->host_path;
    if (!sub_path.empty()) {
      const std::string fix = "; use a relative path inside the volume";
      if (sub_path.front() == '/')
        return InvalidArgument(sub_path_field, "\"" + sub_path + "\" is absolute" + fix);
      for (const fs::path& element : fs::path(sub_path)) {
        if (element == "..") {
          return InvalidArgument(sub_path_field, "\"" + sub_path + "\" contains '..'" + fix);
        }
      }
      std::error_code error;
      if (!fs::is_directory(volume->host_path, error)) {
        return InvalidArgument(sub_path_field, "volume \"" + name + "\" is the file " +
                                                   volume->host_path.string() +
                                                   ", not a directory; drop the subPath");
      }
      source = volume->host_path / sub_path;
      if (!fs::exists(fs::symlink_status(source, error))) {
        // Kubelet creates a missing subPath as a directory with the volume's own mode.
        fs::create_directories(source, error);
        if (!error) {
          const fs::perms volume_mode = fs::status(volume->host_path, error).permissions();
          if (!error) fs::permissions(source, volume_mode, fs::perm_options::replace, error);
        }
        if (error) {
          return Error{ErrorCode::kInternal,
                       "creating subPath " + source.string() + ": " + error.message(),
                       sub_path_field};
        }
      }
      // A symlink inside the volume must not lead the mount out of it.
      const fs::path volume_root = fs::weakly_canonical(volume->host_path, error);
      const fs::path resolved = fs::weakly_canonical(source, error);
      const fs::path inside = resolved.lexically_relative(volume_root);
      if (error || inside.empty() || *inside.begin() == "..") {
        return InvalidArgument(sub_path_field, "\"" + sub_path + "\" resolves to " +
                                                   resolved.string() + ", outside volume \"" +
                                                   name + "\"" + fix);
      }
    }
    mounts.push_back(
        BindMount{source, mount_path, BoolMember(mount, "readOnly") || volume->read_only});
  }
  return mounts;
}

}  // namespace fulcrum::local_node
