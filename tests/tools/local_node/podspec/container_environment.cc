#include "tests/tools/local_node/podspec/container_environment.h"

#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "tests/tools/local_node/podspec/downward_api.h"
#include "tests/tools/local_node/podspec/expansion.h"
#include "tests/tools/local_node/podspec/json_fields.h"
#include "tests/tools/local_node/podspec/referenced_data.h"

namespace fulcrum::local_node {
namespace {

// Variables in the order they were first defined; a redefinition replaces the
// value in place, so the final list has one entry per name.
class OrderedEnvironment {
 public:
  void Set(const std::string& name, std::string value) {
    auto [position, inserted] = index_.try_emplace(name, variables_.size());
    if (inserted) {
      variables_.push_back(EnvVar{name, std::move(value)});
    } else {
      variables_[position->second].value = std::move(value);
    }
  }

  std::optional<std::string> Lookup(std::string_view name) const {
    auto found = index_.find(std::string(name));
    if (found == index_.end()) return std::nullopt;
    return variables_[found->second].value;
  }

  std::vector<EnvVar> Take() && { return std::move(variables_); }

 private:
  std::vector<EnvVar> variables_;
  std::unordered_map<std::string, std::size_t> index_;
};

// Each Secret/ConfigMap is read once per container, as kubelet's per-call maps do,
// so that every variable from one object sees the same version of it.
class ReferenceCache {
 public:
  ReferenceCache(PodReferences& references, std::string ns)
      : references_(references), ns_(std::move(ns)) {}

  Result<std::optional<ReferencedEntries>> Read(ReferencedKind kind, const std::string& name,
                                                bool optional, const std::string& field) {
    const auto key = std::make_pair(kind, name);
    if (auto found = cache_.find(key); found != cache_.end()) return found->second;
    Result<std::optional<ReferencedEntries>> entries = ReadReferencedEntries(
        references_, kind, ns_, name, optional, /*include_binary_data=*/false, field);
    if (!entries.ok()) return entries;
    // An absent optional object is not cached: a later non-optional reference must still fail.
    if (entries->has_value()) cache_.emplace(key, *entries);
    return entries;
  }

  const std::string& ns() const { return ns_; }

 private:
  PodReferences& references_;
  std::string ns_;
  std::map<std::pair<ReferencedKind, std::string>, std::optional<ReferencedEntries>> cache_;
};

Result<void> AddEnvFrom(const nlohmann::json& source, const std::string& field,
                        ReferenceCache& cache, OrderedEnvironment& environment) {
  const nlohmann::json* config_map = Member(source, "configMapRef");
  const nlohmann::json* secret = Member(source, "secretRef");
  if ((config_map == nullptr) == (secret == nullptr)) {
    return InvalidArgument(field, "must set exactly one of configMapRef and secretRef");
  }
  const ReferencedKind kind =
      secret != nullptr ? ReferencedKind::kSecret : ReferencedKind::kConfigMap;
  const nlohmann::json& reference = secret != nullptr ? *secret : *config_map;
  const std::string reference_field = field + (secret != nullptr ? ".secretRef" : ".configMapRef");
  Result<std::optional<ReferencedEntries>> entries = cache.Read(
      kind, StringMember(reference, "name"), BoolMember(reference, "optional"), reference_field);
  if (!entries.ok()) return entries.error();
  if (!entries->has_value()) return Ok();
  const std::string prefix = StringMember(source, "prefix");
  for (const auto& [key, value] : **entries) environment.Set(prefix + key, value);
  return Ok();
}

// The value of one valueFrom, or std::nullopt when an optional reference is
// missing: kubelet then leaves the variable out entirely (not even empty).
Result<std::optional<std::string>> ResolveValueFrom(
    const nlohmann::json& pod, const nlohmann::json& container, const nlohmann::json& value_from,
    const std::string& field, const PodRuntimeFacts& facts, ReferenceCache& cache) {
  for (const auto& [member, kind] : {std::pair{"secretKeyRef", ReferencedKind::kSecret},
                                     std::pair{"configMapKeyRef", ReferencedKind::kConfigMap}}) {
    const nlohmann::json* selector = Member(value_from, member);
    if (selector == nullptr) continue;
    const std::string selector_field = field + "." + member;
    const std::string name = StringMember(*selector, "name");
    const std::string key = StringMember(*selector, "key");
    const bool optional = BoolMember(*selector, "optional");
    if (key.empty())
      return InvalidArgument(selector_field + ".key", "is required; name the key to read");
    Result<std::optional<ReferencedEntries>> entries =
        cache.Read(kind, name, optional, selector_field);
    if (!entries.ok()) return entries.error();
    if (!entries->has_value()) return std::optional<std::string>();
    auto found = (*entries)->find(key);
    if (found == (*entries)->end()) {
      if (optional) return std::optional<std::string>();
      return MissingKeyError(kind, cache.ns(), name, key, selector_field);
    }
    return std::optional<std::string>(found->second);
  }
  if (const nlohmann::json* selector = Member(value_from, "fieldRef")) {
    Result<std::string> value = ResolveFieldSelector(
        pod, *selector, facts, /*allow_whole_maps=*/false, field + ".fieldRef");
    if (!value.ok()) return value.error();
    return std::optional<std::string>(std::move(*value));
  }
  if (const nlohmann::json* selector = Member(value_from, "resourceFieldRef")) {
    Result<std::string> value =
        ResolveResourceFieldRef(pod, *selector, &container, field + ".resourceFieldRef");
    if (!value.ok()) return value.error();
    return std::optional<std::string>(std::move(*value));
  }
  return InvalidArgument(field,
                         "has no source this agent supports; use secretKeyRef, configMapKeyRef, "
                         "fieldRef or resourceFieldRef");
}

std::vector<std::string> ExpandEach(const nlohmann::json& strings, const VariableLookup& lookup) {
  std::vector<std::string> expanded;
  for (const nlohmann::json& text : strings) {
    expanded.push_back(Expand(text.is_string() ? text.get<std::string>() : text.dump(), lookup));
  }
  return expanded;
}

}  // namespace

Result<std::vector<EnvVar>> BuildContainerEnvironment(
    const nlohmann::json& pod, const nlohmann::json& container, const std::string& field_prefix,
    const PodRuntimeFacts& facts, PodReferences& references, const std::vector<EnvVar>& base) {
  OrderedEnvironment environment;
  for (const EnvVar& variable : base) environment.Set(variable.name, variable.value);
  ReferenceCache cache(references, PodNamespace(pod));

  const nlohmann::json& env_from = ArrayMember(container, "envFrom");
  for (std::size_t i = 0; i < env_from.size(); ++i) {
    const std::string field = field_prefix + ".envFrom[" + std::to_string(i) + "]";
    if (Result<void> added = AddEnvFrom(env_from[i], field, cache, environment); !added.ok()) {
      return added.error();
    }
  }

  const VariableLookup lookup = [&environment](std::string_view name) {
    return environment.Lookup(name);
  };
  const nlohmann::json& env = ArrayMember(container, "env");
  for (std::size_t i = 0; i < env.size(); ++i) {
    const std::string field = field_prefix + ".env[" + std::to_string(i) + "]";
    const std::string name = StringMember(env[i], "name");
    if (name.empty()) return InvalidArgument(field + ".name", "is required; name the variable");
    // As kubelet: a non-empty value wins over valueFrom; an empty one defers to it.
    const std::string literal = StringMember(env[i], "value");
    const nlohmann::json* value_from = Member(env[i], "valueFrom");
    if (!literal.empty() || value_from == nullptr) {
      environment.Set(name, Expand(literal, lookup));
      continue;
    }
    Result<std::optional<std::string>> value =
        ResolveValueFrom(pod, container, *value_from, field + ".valueFrom", facts, cache);
    if (!value.ok()) return value.error();
    if (value->has_value()) environment.Set(name, std::move(**value));
  }
  return std::move(environment).Take();
}

CommandLine ExpandCommandAndArgs(const nlohmann::json& container,
                                 const std::vector<EnvVar>& environment) {
  std::unordered_map<std::string_view, std::string_view> values;
  for (const EnvVar& variable : environment) values.insert_or_assign(variable.name, variable.value);
  const VariableLookup lookup = [&values](std::string_view name) -> std::optional<std::string> {
    auto found = values.find(name);
    if (found == values.end()) return std::nullopt;
    return std::string(found->second);
  };
  return CommandLine{ExpandEach(ArrayMember(container, "command"), lookup),
                     ExpandEach(ArrayMember(container, "args"), lookup)};
}

}  // namespace fulcrum::local_node
