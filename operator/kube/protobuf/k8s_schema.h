// The Kubernetes built-in API types as protobuf descriptors, loaded from the descriptor set
// compiled at build time from k8s.io/api and k8s.io/apimachinery (the version the test
// cluster runs). Immutable after construction; one shared instance.
#pragma once

#include <google/protobuf/descriptor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fulcrum::kube::protobuf {

// Types whose JSON form is not their field-by-field protobuf form.
enum class SpecialType {
  kNone,
  kTime,         // meta/v1 Time: RFC 3339 seconds, null when zero
  kMicroTime,    // meta/v1 MicroTime: RFC 3339 with microseconds
  kDuration,     // meta/v1 Duration: Go's time.Duration text, "1m30s"
  kQuantity,     // resource.Quantity: its canonical string
  kIntOrString,  // intstr.IntOrString: a number or a string
  kRawJson,      // runtime.RawExtension, meta/v1 FieldsV1: bytes that are JSON
  kStringList,   // meta/v1 Verbs, ExtraValue: a list of strings
};

// What the transcoder needs of a message type, precomputed: one lookup per message instead
// of one per field.
struct MessageInfo {
  SpecialType special = SpecialType::kNone;
  std::vector<const google::protobuf::FieldDescriptor*> fields_by_number;  // null where none
  std::vector<bool> inline_by_number;            // Go embeds it with json:",inline"
  std::vector<std::string> json_name_by_number;  // "" where it is the protobuf name

  const google::protobuf::FieldDescriptor* Field(std::uint32_t number) const {
    return number < fields_by_number.size() ? fields_by_number[number] : nullptr;
  }
  // The field's members belong in this message's JSON object (Probe.handler: httpGet...).
  bool Inline(std::uint32_t number) const {
    return number < inline_by_number.size() && inline_by_number[number];
  }
  const std::string& JsonName(const google::protobuf::FieldDescriptor& field) const {
    const auto number = static_cast<std::size_t>(field.number());
    return number < json_name_by_number.size() && !json_name_by_number[number].empty()
               ? json_name_by_number[number]
               : field.name();
  }
};

// Field numbers of the ObjectMeta fields the cache indexes (-1 where absent), looked up by
// name once, so that reading each listed item's identity is a plain walk of its bytes.
struct ObjectMetaFields {
  int name = -1;
  int ns = -1;
  int uid = -1;
  int resource_version = -1;
  int labels = -1;
  int owner_references = -1;
  int owner_uid = -1;  // in OwnerReference
};

class K8sSchema {
 public:
  // The schema built into this binary.
  static const K8sSchema& BuiltIn();

  // The message for `kind` in `api_version` ("v1", "apps/v1"), e.g. PodList; nullptr if the
  // group/version/kind is not a built-in type (custom resources never are).
  const google::protobuf::Descriptor* Find(std::string_view api_version,
                                           std::string_view kind) const;
  // Whether a group/version has protobuf types here: ("", "v1"), ("apps", "v1"),
  // ("coordination.k8s.io", "v1")...; never for custom resources.
  bool HasGroupVersion(std::string_view group, std::string_view version) const;
  // Every message type of the schema has one.
  const MessageInfo& InfoOf(const google::protobuf::Descriptor* type) const;
  const ObjectMetaFields& object_meta_fields() const { return object_meta_fields_; }

 private:
  K8sSchema();
  std::unique_ptr<google::protobuf::DescriptorPool> pool_;
  void AddInfo(const google::protobuf::Descriptor* type);
  void ApplyJsonFields(std::string_view lines);
  std::unordered_map<const google::protobuf::Descriptor*, MessageInfo> info_;
  ObjectMetaFields object_meta_fields_;
};

}  // namespace fulcrum::kube::protobuf
