#include "tests/tools/local_node/podspec/referenced_data.h"

#include <absl/strings/escaping.h>

#include <nlohmann/json.hpp>

#include "tests/tools/local_node/podspec/json_fields.h"

namespace fulcrum::local_node {
namespace {

Result<void> AddEntries(const nlohmann::json& object, std::string_view member, bool base64,
                        const std::string& description, const std::string& field,
                        ReferencedEntries& entries) {
  for (const auto& [key, value] : ObjectMember(object, member).items()) {
    if (!value.is_string()) {
      return InvalidArgument(field,
                             description + " " + std::string(member) + "[\"" + key +
                                 "\"] is not a string; the API server returns strings there");
    }
    if (!base64) {
      entries.insert_or_assign(key, value.get<std::string>());
      continue;
    }
    std::string decoded;
    if (!absl::Base64Unescape(value.get<std::string>(), &decoded)) {
      return InvalidArgument(field,
                             description + " " + std::string(member) + "[\"" + key +
                                 "\"] is not valid base64; the API server returns base64 there");
    }
    entries.insert_or_assign(key, std::move(decoded));
  }
  return Ok();
}

}  // namespace

const char* KindName(ReferencedKind kind) {
  return kind == ReferencedKind::kSecret ? "Secret" : "ConfigMap";
}

Result<std::optional<ReferencedEntries>> ReadReferencedEntries(
    PodReferences& references, ReferencedKind kind, const std::string& ns, const std::string& name,
    bool optional, bool include_binary_data, const std::string& field) {
  const std::string description = std::string(KindName(kind)) + " " + ns + "/" + name;
  if (name.empty()) {
    return InvalidArgument(field, std::string("names no ") + KindName(kind) + "; set its name");
  }
  Result<nlohmann::json> object = kind == ReferencedKind::kSecret ? references.Secret(ns, name)
                                                                  : references.ConfigMap(ns, name);
  if (!object.ok()) {
    if (object.error().code == ErrorCode::kNotFound) {
      if (optional) return std::optional<ReferencedEntries>();
      return Error{ErrorCode::kFailedPrecondition,
                   description + " does not exist; create it, or mark the reference optional: true",
                   field};
    }
    return Error{object.error().code, "reading " + description + ": " + object.error().message,
                 field};
  }

  ReferencedEntries entries;
  if (kind == ReferencedKind::kSecret) {
    // Objects read back carry `data` only: the API server folds stringData into it.
    if (Result<void> added = AddEntries(*object, "data", true, description, field, entries);
        !added.ok()) {
      return added.error();
    }
  } else {
    if (Result<void> added = AddEntries(*object, "data", false, description, field, entries);
        !added.ok()) {
      return added.error();
    }
    if (include_binary_data) {
      if (Result<void> added = AddEntries(*object, "binaryData", true, description, field, entries);
          !added.ok()) {
        return added.error();
      }
    }
  }
  return std::optional<ReferencedEntries>(std::move(entries));
}

Error MissingKeyError(ReferencedKind kind, const std::string& ns, const std::string& name,
                      std::string_view key, const std::string& field) {
  return Error{ErrorCode::kFailedPrecondition,
               std::string(KindName(kind)) + " " + ns + "/" + name + " has no key \"" +
                   std::string(key) + "\"; add the key, or mark the reference optional: true",
               field};
}

}  // namespace fulcrum::local_node
