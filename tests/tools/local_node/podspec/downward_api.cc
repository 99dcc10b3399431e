#include "tests/tools/local_node/podspec/downward_api.h"

#include <cstdint>
#include <cstdio>
#include <string_view>

#include "tests/tools/local_node/podspec/container_environment.h"
#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/podspec/quantity.h"

namespace fulcrum::local_node {
namespace {

constexpr std::string_view kSupportedFieldPaths =
    "metadata.name, metadata.namespace, metadata.uid, metadata.labels['<key>'], "
    "metadata.annotations['<key>'], spec.nodeName, spec.serviceAccountName, status.podIP, "
    "status.podIPs, status.hostIP, status.hostIPs";

// Go's %q for the strings kubelet's FormatMap writes: quotes, backslashes and
// control characters escaped; other bytes (UTF-8 included) kept as they are.
std::string GoQuote(std::string_view text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        quoted += "\\\"";
        break;
      case '\\':
        quoted += "\\\\";
        break;
      case '\a':
        quoted += "\\a";
        break;
      case '\b':
        quoted += "\\b";
        break;
      case '\f':
        quoted += "\\f";
        break;
      case '\n':
        quoted += "\\n";
        break;
      case '\r':
        quoted += "\\r";
        break;
      case '\t':
        quoted += "\\t";
        break;
      case '\v':
        quoted += "\\v";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char escaped[5];
          std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
          quoted += escaped;
        } else {
          quoted.push_back(static_cast<char>(c));
        }
    }
  }
  return quoted + "\"";
}

// `k="v"` lines sorted by key, no trailing newline: fieldpath.FormatMap.
std::string FormatMap(const nlohmann::json& map) {
  std::string text;
  for (const auto& [key, value] : map.items()) {  // nlohmann's objects iterate in key order
    if (!text.empty()) text += '\n';
    text += key + "=" + GoQuote(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text;
}

// "metadata.labels['app']" -> ("metadata.labels", "app"), as fieldpath.SplitMaybeSubscriptedPath.
bool SplitSubscript(std::string_view path, std::string_view& base, std::string_view& subscript) {
  if (!path.ends_with("']")) return false;
  path.remove_suffix(2);
  const std::size_t opener = path.find("['");
  if (opener == std::string_view::npos || opener == 0) return false;
  base = path.substr(0, opener);
  subscript = path.substr(opener + 2);
  return true;
}

const nlohmann::json* FindContainer(const nlohmann::json& pod, const std::string& name) {
  const nlohmann::json& spec = ObjectMember(pod, "spec");
  for (const char* list : {"containers", "initContainers"}) {
    for (const nlohmann::json& container : ArrayMember(spec, list)) {
      if (StringMember(container, "name") == name) return &container;
    }
  }
  return nullptr;
}

}  // namespace

Result<std::string> ResolveFieldRef(const nlohmann::json& pod, const std::string& field_path,
                                    const PodRuntimeFacts& facts, bool allow_whole_maps,
                                    const std::string& field) {
  const nlohmann::json& metadata = ObjectMember(pod, "metadata");
  const nlohmann::json& spec = ObjectMember(pod, "spec");

  std::string_view base;
  std::string_view subscript;
  if (SplitSubscript(field_path, base, subscript)) {
    if (base != "metadata.labels" && base != "metadata.annotations") {
      return InvalidArgument(field,
                             "fieldPath \"" + field_path +
                                 "\" does not support a subscript; only metadata.labels['<key>'] "
                                 "and metadata.annotations['<key>'] do");
    }
    if (subscript.empty()) {
      return InvalidArgument(field,
                             "fieldPath \"" + field_path + "\" has an empty key; name the key");
    }
    return StringMember(ObjectMember(metadata, base.substr(std::string_view("metadata.").size())),
                        subscript);
  }

  if (field_path == "metadata.name") return StringMember(metadata, "name");
  if (field_path == "metadata.namespace") return PodNamespace(pod);
  if (field_path == "metadata.uid") return StringMember(metadata, "uid");
  if (field_path == "spec.nodeName") return StringMember(spec, "nodeName");
  if (field_path == "spec.serviceAccountName") return StringMember(spec, "serviceAccountName");
  // This agent gives each pod one address of one family, so the plural forms
  // (comma-separated lists in kubelet) hold that one address.
  if (field_path == "status.podIP" || field_path == "status.podIPs") return facts.pod_ip;
  if (field_path == "status.hostIP" || field_path == "status.hostIPs") return facts.host_ip;
  if (field_path == "metadata.labels" || field_path == "metadata.annotations") {
    if (!allow_whole_maps) {
      return InvalidArgument(
          field, "fieldPath \"" + field_path +
                     "\" is only allowed in downwardAPI volumes; in env, name one key: " +
                     field_path + "['<key>']");
    }
    return FormatMap(
        ObjectMember(metadata, field_path.substr(std::string_view("metadata.").size())));
  }
  return InvalidArgument(field,
                         "unsupported fieldPath \"" + field_path + "\"; use one of " +
                             std::string(kSupportedFieldPaths) +
                             (allow_whole_maps ? ", metadata.labels, metadata.annotations" : ""));
}

Result<std::string> ResolveFieldSelector(const nlohmann::json& pod, const nlohmann::json& selector,
                                         const PodRuntimeFacts& facts, bool allow_whole_maps,
                                         const std::string& field) {
  const std::string api_version = StringMember(selector, "apiVersion");
  if (!api_version.empty() && api_version != "v1") {
    return InvalidArgument(field + ".apiVersion",
                           "\"" + api_version + "\" is not supported; use v1");
  }
  return ResolveFieldRef(pod, StringMember(selector, "fieldPath"), facts, allow_whole_maps, field);
}

Result<std::string> ResolveResourceFieldRef(const nlohmann::json& pod,
                                            const nlohmann::json& selector,
                                            const nlohmann::json* default_container,
                                            const std::string& field) {
  const std::string container_name = StringMember(selector, "containerName");
  const nlohmann::json* container = default_container;
  if (!container_name.empty()) {
    container = FindContainer(pod, container_name);
    if (container == nullptr) {
      return InvalidArgument(
          field + ".containerName",
          "the pod has no container named \"" + container_name + "\"; name one of spec.containers");
    }
  } else if (container == nullptr) {
    return InvalidArgument(field + ".containerName",
                           "is required in a volume; name the container whose resources to show");
  }

  const std::string resource = StringMember(selector, "resource");
  std::string_view kind;  // "limits" or "requests"
  std::string_view name;  // "cpu" or "memory"
  if (const std::size_t dot = resource.find('.'); dot != std::string::npos) {
    kind = std::string_view(resource).substr(0, dot);
    name = std::string_view(resource).substr(dot + 1);
  }
  const bool supported =
      (kind == "limits" || kind == "requests") && (name == "cpu" || name == "memory");
  if (!supported) {
    return InvalidArgument(field + ".resource",
                           "resource \"" + resource +
                               "\" is not supported; use limits.cpu, requests.cpu, "
                               "limits.memory or requests.memory");
  }

  const nlohmann::json* amount =
      Member(ObjectMember(ObjectMember(*container, "resources"), kind), name);
  if (amount == nullptr || !(amount->is_string() || amount->is_number())) {
    return InvalidArgument(field, "container \"" + StringMember(*container, "name") +
                                      "\" sets no " + resource + "; set resources." + resource +
                                      " on it (this agent has no node allocatable to default to)");
  }
  Result<Quantity> quantity =
      Quantity::Parse(amount->is_string() ? amount->get<std::string>() : amount->dump());
  if (!quantity.ok())
    return InvalidArgument(field, "resources." + resource + ": " + quantity.error().message);

  // Kubernetes treats an absent or zero divisor as 1.
  const nlohmann::json* divisor_text = Member(selector, "divisor");
  Result<Quantity> divisor = Quantity::Parse("1");
  if (divisor_text != nullptr && (divisor_text->is_string() || divisor_text->is_number())) {
    Result<Quantity> parsed = Quantity::Parse(
        divisor_text->is_string() ? divisor_text->get<std::string>() : divisor_text->dump());
    if (!parsed.ok()) return InvalidArgument(field + ".divisor", parsed.error().message);
    if (!parsed->IsZero()) divisor = std::move(parsed);
  }

  // CPU counts in millicores and memory in bytes, as ExtractContainerResourceValue.
  const int scale = name == "cpu" ? 3 : 0;
  Result<std::int64_t> numerator = quantity->ScaledCeil(scale);
  Result<std::int64_t> denominator = divisor->ScaledCeil(scale);
  if (!numerator.ok())
    return InvalidArgument(field, "resources." + resource + ": " + numerator.error().message);
  if (!denominator.ok()) return InvalidArgument(field + ".divisor", denominator.error().message);
  const std::int64_t count = *numerator / *denominator + (*numerator % *denominator != 0 ? 1 : 0);
  return std::to_string(count);
}

}  // namespace fulcrum::local_node
