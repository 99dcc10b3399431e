#include "operator/controller/pod_template.h"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

namespace fulcrum::controller {
namespace {

using Json = nlohmann::json;

constexpr const char* kRequired = "requiredDuringSchedulingIgnoredDuringExecution";
constexpr const char* kPreferred = "preferredDuringSchedulingIgnoredDuringExecution";
constexpr std::string_view kField = "spec.template";

// The fields a template may set; anything else would be dropped silently, so it is refused.
constexpr std::array kPodFields = {"volumes",           "serviceAccountName", "imagePullSecrets",
                                   "tolerations",       "nodeSelector",       "affinity",
                                   "priorityClassName", "securityContext",    "containers"};
constexpr std::array kContainerFields = {"name",    "volumeMounts", "env",
                                         "envFrom", "resources",    "securityContext"};

std::string Field(std::string_view suffix) {
  return std::string(kField) + std::string(suffix);
}

std::string Indexed(const std::string& field, size_t index) {
  return field + "[" + std::to_string(index) + "]";
}

const char* TypeName(Json::value_t type) {
  switch (type) {
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "a list";
    default:
      return "a string";
  }
}

// parent[key] into `out` when present (null counts as absent); another type is an error.
Status Member(const Json& parent, const char* key, Json::value_t type, const std::string& field,
              Json& out) {
  if (!parent.contains(key) || parent.at(key).is_null()) return Ok();
  const Json& value = parent.at(key);
  if (value.type() != type) {
    return InvalidArgument(field,
                           std::string("must be ") + TypeName(type) + ", not " + value.type_name());
  }
  out = value;
  return Ok();
}

Status StringMember(const Json& parent, const char* key, const std::string& field,
                    std::string& out) {
  Json value;
  if (Status status = Member(parent, key, Json::value_t::string, field, value); !status.ok())
    return status;
  if (value.is_string()) out = value.get<std::string>();
  return Ok();
}

Status StringMap(const Json& parent, const char* key, const std::string& field,
                 std::map<std::string, std::string>& out) {
  Json map;
  if (Status status = Member(parent, key, Json::value_t::object, field, map); !status.ok())
    return status;
  for (const auto& [name, value] : map.items()) {
    if (!value.is_string()) return InvalidArgument(field + "." + name, "must be a string");
    out[name] = value.get<std::string>();
  }
  return Ok();
}

// Every item of a list is an object.
Status ObjectList(const Json& parent, const char* key, const std::string& field, Json& out) {
  if (Status status = Member(parent, key, Json::value_t::array, field, out); !status.ok())
    return status;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].is_object()) return InvalidArgument(Indexed(field, i), "must be an object");
  }
  return Ok();
}

template <size_t N>
Status OnlyKnownFields(const Json& object, const std::array<const char*, N>& known,
                       const std::string& field) {
  for (const auto& item : object.items()) {
    // A named copy, not a structured binding: clang 14 (the sanitizer build) cannot capture one.
    const std::string& key = item.key();
    if (std::find_if(known.begin(), known.end(), [&](const char* k) { return key == k; }) !=
        known.end()) {
      continue;
    }
    std::string list;
    for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
    return InvalidArgument(field + "." + key, "is not a template field; a template sets " + list);
  }
  return Ok();
}

// What the operator sets on the pod itself, and where to say it instead.
Status RefuseOperatorPodFields(const Json& spec, const std::string& field) {
  static const std::array<std::pair<const char*, const char*>, 4> owned = {{
      {"restartPolicy",
       "is the operator's (Never: it replaces failed workers itself, up to "
       "spec.runPolicy.backoffLimit)"},
      {"nodeName",
       "is the scheduler's: the operator places trainers on GPU nodes by node affinity; use "
       "spec.template.spec.nodeSelector or affinity"},
      {"hostname", "is the operator's: every worker is named <job>-worker-<n>"},
      {"subdomain", "is the operator's: the job's headless Service <job>-workers"},
  }};
  for (const auto& [key, message] : owned) {
    if (spec.contains(key)) return InvalidArgument(field + "." + key, message);
  }
  return Ok();
}

Status ParseLabels(const Json& metadata, PodTemplate& out) {
  const std::string labels = Field(".metadata.labels");
  if (Status status = StringMap(metadata, "labels", labels, out.labels); !status.ok())
    return status;
  for (const auto& [key, value] : out.labels) {
    if (IsOperatorLabelKey(key)) {
      return InvalidArgument(labels, "label " + key +
                                         " is the operator's (fulcrum.dev/*, "
                                         "app.kubernetes.io/name and managed-by): use another key");
    }
  }
  const std::string annotations = Field(".metadata.annotations");
  if (Status status = StringMap(metadata, "annotations", annotations, out.annotations);
      !status.ok()) {
    return status;
  }
  for (const auto& [key, value] : out.annotations) {
    if (key.starts_with("fulcrum.dev/")) {
      return InvalidArgument(
          annotations, "annotation " + key + " is the operator's (fulcrum.dev/*): use another key");
    }
  }
  return Ok();
}

Status ParseVolumes(const Json& spec, PodTemplate& out) {
  const std::string field = Field(".spec.volumes");
  if (Status status = ObjectList(spec, "volumes", field, out.volumes); !status.ok()) return status;
  std::set<std::string> names;
  for (size_t i = 0; i < out.volumes.size(); ++i) {
    const Json& name = out.volumes[i].value("name", Json());
    const std::string item = Indexed(field, i) + ".name";
    if (!name.is_string() || name.get<std::string>().empty())
      return InvalidArgument(item, "every volume needs a name");
    if (name.get<std::string>().starts_with(kReservedVolumePrefix)) {
      return InvalidArgument(item,
                             "volume names starting with fulcrum- are the operator's (its "
                             "token volume is fulcrum-token): rename the volume");
    }
    if (!names.insert(name.get<std::string>()).second)
      return InvalidArgument(item, "two volumes are named " + name.get<std::string>());
  }
  return Ok();
}

bool UnderOperatorDirectory(const std::string& path) {
  for (std::string_view directory : {"/var/run/fulcrum", "/run/fulcrum"}) {
    if (path == directory || (path.starts_with(directory) && path[directory.size()] == '/'))
      return true;
  }
  return false;
}

Status ParseVolumeMounts(const Json& container, const std::string& container_field,
                         PodTemplate& out) {
  const std::string field = container_field + ".volumeMounts";
  if (Status status = ObjectList(container, "volumeMounts", field, out.volume_mounts);
      !status.ok()) {
    return status;
  }
  std::set<std::string> volumes;
  for (const Json& volume : out.volumes) {
    if (volume.value("name", Json()).is_string()) volumes.insert(volume["name"].get<std::string>());
  }
  std::set<std::string> paths;
  for (size_t i = 0; i < out.volume_mounts.size(); ++i) {
    const Json& mount = out.volume_mounts[i];
    const std::string item = Indexed(field, i);
    const Json& name = mount.value("name", Json());
    if (!name.is_string() || !volumes.contains(name.get<std::string>())) {
      return InvalidArgument(item + ".name",
                             "names no volume of spec.template.spec.volumes (" +
                                 (name.is_string() ? name.get<std::string>() : "none") +
                                 "): add the volume there or fix the name");
    }
    const Json& path = mount.value("mountPath", Json());
    if (!path.is_string() || !path.get<std::string>().starts_with("/"))
      return InvalidArgument(item + ".mountPath", "must be an absolute path");
    if (UnderOperatorDirectory(path.get<std::string>())) {
      return InvalidArgument(item + ".mountPath",
                             std::string("is the operator's: its token is mounted at ") +
                                 kTokenMountPath + "; mount the volume elsewhere");
    }
    if (!paths.insert(path.get<std::string>()).second) {
      return InvalidArgument(item + ".mountPath",
                             "two volumes are mounted at " + path.get<std::string>());
    }
  }
  return Ok();
}

Status ParseEnv(const Json& container, const std::string& container_field, PodTemplate& out) {
  const std::string field = container_field + ".env";
  if (Status status = ObjectList(container, "env", field, out.env); !status.ok()) return status;
  std::set<std::string> names;
  for (size_t i = 0; i < out.env.size(); ++i) {
    const Json& variable = out.env[i];
    const std::string item = Indexed(field, i);
    const Json& name = variable.value("name", Json());
    if (!name.is_string() || name.get<std::string>().empty())
      return InvalidArgument(item + ".name", "every variable needs a name");
    if (IsOperatorEnvName(name.get<std::string>())) {
      return InvalidArgument(item + ".name",
                             name.get<std::string>() +
                                 " is the operator's (FULCRUM_*, POD_NAME, POD_IP, NODE_NAME): "
                                 "use another name");
    }
    if (!names.insert(name.get<std::string>()).second)
      return InvalidArgument(item + ".name", "two variables are named " + name.get<std::string>());
    if (variable.contains("value") && variable.contains("valueFrom"))
      return InvalidArgument(item, "set value or valueFrom, not both");
    if (variable.contains("valueFrom") && !variable["valueFrom"].is_object())
      return InvalidArgument(item + ".valueFrom", "must be an object");
  }
  return ObjectList(container, "envFrom", container_field + ".envFrom", out.env_from);
}

Status ParseResources(const Json& container, const std::string& container_field, PodTemplate& out) {
  const std::string field = container_field + ".resources";
  Json resources = Json::object();
  if (Status status = Member(container, "resources", Json::value_t::object, field, resources);
      !status.ok()) {
    return status;
  }
  for (const auto& [key, value] : resources.items()) {
    if (key != "requests" && key != "limits")
      return InvalidArgument(field + "." + key, "a template sets requests and limits");
  }
  for (const char* kind : {"requests", "limits"}) {
    Json& map = std::string_view(kind) == "requests" ? out.requests : out.limits;
    if (Status status = Member(resources, kind, Json::value_t::object, field + "." + kind, map);
        !status.ok()) {
      return status;
    }
    for (const auto& [name, quantity] : map.items()) {
      const std::string item = field + "." + kind + "." + name;
      // The operator's resource name is configurable (--gpu-resource); every vendor's device
      // plugin names its GPUs <vendor>/gpu, so all of them are refused here.
      if (name.ends_with("/gpu")) {
        return InvalidArgument(item,
                               "GPUs are the operator's: set spec.gpusPerWorker (every worker "
                               "requests and is limited to that many)");
      }
      if (!quantity.is_string() && !quantity.is_number())
        return InvalidArgument(item, "must be a quantity such as 500m, 4 or 8Gi");
    }
  }
  return Ok();
}

Status ParseTrainerContainer(const Json& spec, PodTemplate& out) {
  const std::string field = Field(".spec.containers");
  Json containers = Json::array();
  if (Status status = ObjectList(spec, "containers", field, containers); !status.ok())
    return status;
  if (containers.size() > 1) {
    return InvalidArgument(field,
                           "has one container, trainer (the operator runs no other containers)");
  }
  if (containers.empty()) return Ok();
  const Json& container = containers[0];
  const std::string item = Indexed(field, 0);
  if (container.value("name", Json()) != "trainer")
    return InvalidArgument(item + ".name", "the one container is the trainer: name it trainer");
  static const std::array<std::pair<const char*, const char*>, 3> owned = {{
      {"image", "is spec.image: set the trainer image there"},
      {"command", "is spec.command: set the entrypoint there"},
      {"args", "is the operator's, followed by spec.args: add trainer flags there"},
  }};
  for (const auto& [key, message] : owned) {
    if (container.contains(key)) return InvalidArgument(item + "." + key, message);
  }
  if (Status status = OnlyKnownFields(container, kContainerFields, item); !status.ok())
    return status;
  for (Status status : {ParseVolumeMounts(container, item, out), ParseEnv(container, item, out),
                        ParseResources(container, item, out),
                        Member(container, "securityContext", Json::value_t::object,
                               item + ".securityContext", out.container_security_context)}) {
    if (!status.ok()) return status;
  }
  return Ok();
}

// An empty nodeSelectorTerm matches no node; joined with the operator's it would match every
// GPU node, so it is refused rather than given another meaning.
Status ParseAffinity(const Json& spec, PodTemplate& out) {
  const std::string field = Field(".spec.affinity");
  if (Status status = Member(spec, "affinity", Json::value_t::object, field, out.affinity);
      !status.ok()) {
    return status;
  }
  for (const auto& [key, value] : out.affinity.items()) {
    if (key != "nodeAffinity" && key != "podAffinity" && key != "podAntiAffinity")
      return InvalidArgument(field + "." + key, "is not a field of a pod's affinity");
    if (!value.is_object()) return InvalidArgument(field + "." + key, "must be an object");
  }
  const Json node = out.affinity.value("nodeAffinity", Json::object());
  const std::string node_field = field + ".nodeAffinity";
  Json required = Json::object();
  if (Status status =
          Member(node, kRequired, Json::value_t::object, node_field + "." + kRequired, required);
      !status.ok()) {
    return status;
  }
  Json terms = Json::array();
  const std::string terms_field = node_field + "." + kRequired + ".nodeSelectorTerms";
  if (Status status = ObjectList(required, "nodeSelectorTerms", terms_field, terms); !status.ok())
    return status;
  for (size_t i = 0; i < terms.size(); ++i) {
    bool selects = false;
    for (const char* key : {"matchExpressions", "matchFields"}) {
      const Json list = terms[i].value(key, Json::array());
      if (!list.is_array())
        return InvalidArgument(Indexed(terms_field, i) + "." + key, "must be a list");
      selects = selects || !list.empty();
    }
    if (!selects) {
      return InvalidArgument(Indexed(terms_field, i),
                             "an empty term matches no node: give it matchExpressions or "
                             "matchFields, or remove it");
    }
  }
  Json preferred = Json::array();
  return ObjectList(node, kPreferred, node_field + "." + kPreferred, preferred);
}

// first, then the items of second that `keep` accepts.
template <typename Keep>
Json Concatenated(Json first, const Json& second, Keep keep) {
  for (const Json& item : second) {
    if (keep(item)) first.push_back(item);
  }
  return first;
}

Json Concatenated(Json first, const Json& second) {
  return Concatenated(std::move(first), second, [](const Json&) { return true; });
}

Json Terms(const Json& node_affinity) {
  if (!node_affinity.contains(kRequired)) return Json::array();
  return node_affinity[kRequired].value("nodeSelectorTerms", Json::array());
}

}  // namespace

bool IsOperatorEnvName(const std::string& name) {
  return name.starts_with("FULCRUM_") || name == "POD_NAME" || name == "POD_IP" ||
         name == "NODE_NAME";
}

bool IsOperatorLabelKey(const std::string& key) {
  return key.starts_with("fulcrum.dev/") || key == "app.kubernetes.io/name" ||
         key == "app.kubernetes.io/managed-by";
}

Result<PodTemplate> ParsePodTemplate(const Json& spec_template) {
  PodTemplate out;
  if (spec_template.is_null()) return out;
  if (!spec_template.is_object()) {
    return InvalidArgument(std::string(kField),
                           "must be an object with metadata and spec, as a PodTemplateSpec");
  }
  for (const auto& [key, value] : spec_template.items()) {
    if (key != "metadata" && key != "spec")
      return InvalidArgument(Field("." + key), "a template has metadata and spec");
  }
  Json metadata = Json::object();
  Json spec = Json::object();
  for (Status status :
       {Member(spec_template, "metadata", Json::value_t::object, Field(".metadata"), metadata),
        Member(spec_template, "spec", Json::value_t::object, Field(".spec"), spec)}) {
    if (!status.ok()) return status.error();
  }
  for (const auto& [key, value] : metadata.items()) {
    if (key != "labels" && key != "annotations")
      return InvalidArgument(Field(".metadata." + key), "a template sets labels and annotations");
  }
  if (Status status = RefuseOperatorPodFields(spec, Field(".spec")); !status.ok())
    return status.error();
  if (Status status = OnlyKnownFields(spec, kPodFields, Field(".spec")); !status.ok())
    return status.error();
  // Volumes before the container: its mounts must name them.
  for (Status status : {
           ParseLabels(metadata, out),
           ParseVolumes(spec, out),
           ParseTrainerContainer(spec, out),
           StringMember(spec, "serviceAccountName", Field(".spec.serviceAccountName"),
                        out.service_account_name),
           ObjectList(spec, "imagePullSecrets", Field(".spec.imagePullSecrets"),
                      out.image_pull_secrets),
           ObjectList(spec, "tolerations", Field(".spec.tolerations"), out.tolerations),
           StringMap(spec, "nodeSelector", Field(".spec.nodeSelector"), out.node_selector),
           ParseAffinity(spec, out),
           StringMember(spec, "priorityClassName", Field(".spec.priorityClassName"),
                        out.priority_class_name),
           Member(spec, "securityContext", Json::value_t::object, Field(".spec.securityContext"),
                  out.security_context),
       }) {
    if (!status.ok()) return status.error();
  }
  return out;
}

Json AndNodeAffinity(const Json& operator_affinity, const Json& user_affinity) {
  const Json ours = Terms(operator_affinity);
  const Json theirs = Terms(user_affinity);
  Json terms = Json::array();
  if (ours.empty() || theirs.empty()) {
    terms = ours.empty() ? theirs : ours;
  } else {
    for (const Json& a : ours) {
      for (const Json& b : theirs) {
        Json term = Json::object();
        for (const char* key : {"matchExpressions", "matchFields"}) {
          Json joined = Concatenated(a.value(key, Json::array()), b.value(key, Json::array()));
          if (!joined.empty()) term[key] = std::move(joined);
        }
        terms.push_back(std::move(term));
      }
    }
  }
  Json result = Json::object();
  if (!terms.empty()) result[kRequired] = {{"nodeSelectorTerms", terms}};
  Json preferred = Concatenated(operator_affinity.value(kPreferred, Json::array()),
                                user_affinity.value(kPreferred, Json::array()));
  if (!preferred.empty()) result[kPreferred] = std::move(preferred);
  return result;
}

void MergePodTemplate(const PodTemplate& user, const GpuLabelKeys& keys, int gpus, Json& pod) {
  Json& metadata = pod["metadata"];
  Json labels = user.labels;
  const Json operator_labels = metadata.value("labels", Json::object());
  // The operator's win: its Service, NetworkPolicy and caches select by them.
  for (const auto& [key, value] : operator_labels.items()) labels[key] = value;
  metadata["labels"] = labels;
  if (!user.annotations.empty()) {
    Json annotations = metadata.value("annotations", Json::object());
    for (const auto& [key, value] : user.annotations) annotations.emplace(key, value);
    metadata["annotations"] = annotations;
  }

  // ParsePodTemplate refuses what would replace the operator's volume, mount and env; a
  // PodTemplate that did not come from it loses those items here rather than break the trainer.
  Json& spec = pod["spec"];
  Json& container = spec["containers"][0];
  spec["volumes"] =
      Concatenated(spec.value("volumes", Json::array()), user.volumes, [](const Json& volume) {
        return !volume.value("name", "").starts_with(kReservedVolumePrefix);
      });
  container["volumeMounts"] = Concatenated(
      container.value("volumeMounts", Json::array()), user.volume_mounts, [](const Json& mount) {
        return !mount.value("name", "").starts_with(kReservedVolumePrefix) &&
               !UnderOperatorDirectory(mount.value("mountPath", ""));
      });
  // After the operator's, so a user's value may refer to them as $(POD_NAME); env wins over
  // envFrom in Kubernetes, so a Secret's FULCRUM_* key cannot replace the operator's either.
  container["env"] = Concatenated(
      container.value("env", Json::array()), user.env,
      [](const Json& variable) { return !IsOperatorEnvName(variable.value("name", "")); });
  if (!user.env_from.empty()) container["envFrom"] = user.env_from;
  if (!user.container_security_context.empty())
    container["securityContext"] = user.container_security_context;

  Json requests = user.requests;
  Json limits = user.limits;
  requests.erase(keys.resource);
  limits.erase(keys.resource);
  if (gpus > 0) {
    requests[keys.resource] = limits[keys.resource] = std::to_string(gpus);
  }
  for (const auto& [resource, quantity] :
       {std::pair{"cpu", kDefaultCpuRequest}, {"memory", kDefaultMemoryRequest}}) {
    if (!requests.contains(resource) && !limits.contains(resource)) requests[resource] = quantity;
  }
  container["resources"] = {{"requests", requests}};
  if (!limits.empty()) container["resources"]["limits"] = limits;

  spec["tolerations"] = Concatenated(spec.value("tolerations", Json::array()), user.tolerations);
  if (!user.node_selector.empty()) spec["nodeSelector"] = user.node_selector;
  if (!user.service_account_name.empty()) spec["serviceAccountName"] = user.service_account_name;
  if (!user.image_pull_secrets.empty()) spec["imagePullSecrets"] = user.image_pull_secrets;
  if (!user.priority_class_name.empty()) spec["priorityClassName"] = user.priority_class_name;
  if (!user.security_context.empty()) spec["securityContext"] = user.security_context;

  Json affinity = user.affinity;
  const Json ours = spec.contains("affinity")
                        ? spec["affinity"].value("nodeAffinity", Json::object())
                        : Json::object();
  Json node = AndNodeAffinity(ours, user.affinity.value("nodeAffinity", Json::object()));
  affinity.erase("nodeAffinity");
  if (!node.empty()) affinity["nodeAffinity"] = std::move(node);
  if (affinity.empty()) {
    spec.erase("affinity");
  } else {
    spec["affinity"] = std::move(affinity);
  }
}

}  // namespace fulcrum::controller
