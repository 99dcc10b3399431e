// Reads of optional fields of API objects. Objects read back from the API server
// omit empty fields, so an absent field and a field of an unexpected type both
// read as "not set" here; the callers decide which absences are errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace fulcrum::local_node {

inline const nlohmann::json* Member(const nlohmann::json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto found = object.find(key);
  return found == object.end() ? nullptr : &*found;
}

inline std::string StringMember(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* member = Member(object, key);
  return member != nullptr && member->is_string() ? member->get<std::string>() : std::string();
}

inline bool BoolMember(const nlohmann::json& object, std::string_view key) {
  const nlohmann::json* member = Member(object, key);
  return member != nullptr && member->is_boolean() && member->get<bool>();
}

inline std::optional<std::int64_t> IntegerMember(const nlohmann::json& object,
                                                 std::string_view key) {
  const nlohmann::json* member = Member(object, key);
  if (member == nullptr || !member->is_number_integer()) return std::nullopt;
  return member->get<std::int64_t>();
}

// An array member, or an empty array when it is absent, so callers can loop unconditionally.
inline const nlohmann::json& ArrayMember(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kEmpty =
      nlohmann::json::array();  // immutable: not mutable global state
  const nlohmann::json* member = Member(object, key);
  return member != nullptr && member->is_array() ? *member : kEmpty;
}

// An object member, or an empty object when it is absent.
inline const nlohmann::json& ObjectMember(const nlohmann::json& object, std::string_view key) {
  static const nlohmann::json kEmpty =
      nlohmann::json::object();  // immutable: not mutable global state
  const nlohmann::json* member = Member(object, key);
  return member != nullptr && member->is_object() ? *member : kEmpty;
}

// The pod's namespace; "default" as the API server would have set it on creation.
inline std::string PodNamespace(const nlohmann::json& pod) {
  std::string ns = StringMember(ObjectMember(pod, "metadata"), "namespace");
  return ns.empty() ? "default" : ns;
}

}  // namespace fulcrum::local_node
