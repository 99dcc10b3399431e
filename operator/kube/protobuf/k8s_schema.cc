#include "operator/kube/protobuf/k8s_schema.h"

#include <google/protobuf/descriptor.pb.h>

#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "operator/kube/protobuf/k8s_descriptor_set.h"

namespace fulcrum::kube::protobuf {
namespace {
using google::protobuf::Descriptor;

constexpr std::string_view kMeta = "k8s.io.apimachinery.pkg.apis.meta.v1.";

// The directory and package segment of an API group in k8s.io/api: "" -> core, "apps" -> apps,
// "coordination.k8s.io" -> coordination (its first label); nullopt for groups that cannot be
// built-in (custom resources: a dotted name outside k8s.io).
std::optional<std::string> GroupSegment(std::string_view group) {
  if (group.empty()) return "core";
  if (group.find('.') != std::string_view::npos && !group.ends_with(".k8s.io")) return std::nullopt;
  return std::string(group.substr(0, group.find('.')));
}

int NumberOf(const Descriptor* type, const char* name) {
  const google::protobuf::FieldDescriptor* field =
      type == nullptr ? nullptr : type->FindFieldByName(name);
  return field == nullptr ? -1 : field->number();
}
}  // namespace

const K8sSchema& K8sSchema::BuiltIn() {
  static const K8sSchema schema;  // immutable once built; C++ guarantees one construction
  return schema;
}

K8sSchema::K8sSchema() : pool_(std::make_unique<google::protobuf::DescriptorPool>()) {
  google::protobuf::FileDescriptorSet files;
  if (!files.ParseFromArray(kK8sDescriptorSet, static_cast<int>(kK8sDescriptorSetSize))) {
    std::abort();  // the build embedded a broken descriptor set: nothing sensible to do
  }
  for (const google::protobuf::FileDescriptorProto& file : files.file()) {
    if (pool_->BuildFile(file) == nullptr) std::abort();  // --include_imports orders them
  }
  for (int i = 0; i < files.file_size(); ++i) {
    const auto* file = pool_->FindFileByName(files.file(i).name());
    for (int m = 0; file != nullptr && m < file->message_type_count(); ++m) {
      const Descriptor* type = file->message_type(m);
      AddInfo(type);
      // ExtraValue (authentication, authorization, certificates): `repeated string items`.
      if (type->name() == "ExtraValue" && type->field_count() == 1 &&
          type->field(0)->is_repeated()) {
        info_[type].special = SpecialType::kStringList;
      }
    }
  }
  const std::pair<std::string, SpecialType> specials[] = {
      {std::string(kMeta) + "Time", SpecialType::kTime},
      {std::string(kMeta) + "MicroTime", SpecialType::kMicroTime},
      {std::string(kMeta) + "Duration", SpecialType::kDuration},
      {std::string(kMeta) + "FieldsV1", SpecialType::kRawJson},
      {std::string(kMeta) + "Verbs", SpecialType::kStringList},
      {"k8s.io.apimachinery.pkg.api.resource.Quantity", SpecialType::kQuantity},
      {"k8s.io.apimachinery.pkg.api.resource.QuantityValue", SpecialType::kQuantity},
      {"k8s.io.apimachinery.pkg.util.intstr.IntOrString", SpecialType::kIntOrString},
      {"k8s.io.apimachinery.pkg.runtime.RawExtension", SpecialType::kRawJson},
  };
  for (const auto& [name, special] : specials) {
    if (const Descriptor* type = pool_->FindMessageTypeByName(name)) info_[type].special = special;
  }
  const Descriptor* meta = pool_->FindMessageTypeByName(std::string(kMeta) + "ObjectMeta");
  object_meta_fields_ = {
      NumberOf(meta, "name"),
      NumberOf(meta, "namespace"),
      NumberOf(meta, "uid"),
      NumberOf(meta, "resourceVersion"),
      NumberOf(meta, "labels"),
      NumberOf(meta, "ownerReferences"),
      NumberOf(pool_->FindMessageTypeByName(std::string(kMeta) + "OwnerReference"), "uid")};
  ApplyJsonFields(
      std::string_view(reinterpret_cast<const char*>(kK8sJsonFields), kK8sJsonFieldsSize));
}

void K8sSchema::ApplyJsonFields(std::string_view lines) {
  std::size_t start = 0;
  while (start < lines.size()) {
    std::size_t end = lines.find('\n', start);
    if (end == std::string_view::npos) end = lines.size();
    std::istringstream line{std::string(lines.substr(start, end - start))};
    start = end + 1;
    std::string what, message, field_name, json_name;
    if (!(line >> what >> message >> field_name)) continue;
    const Descriptor* type = pool_->FindMessageTypeByName(message);
    const google::protobuf::FieldDescriptor* field =
        type == nullptr ? nullptr : type->FindFieldByName(field_name);
    if (field == nullptr) continue;  // a type of another version than the .proto files
    const auto number = static_cast<std::size_t>(field->number());
    MessageInfo& info = info_[type];
    if (number >= info.fields_by_number.size()) continue;
    if (what == "inline" && field->message_type() != nullptr && !field->is_repeated()) {
      info.inline_by_number[number] = true;
    } else if (what == "rename" && (line >> json_name)) {
      info.json_name_by_number[number] = json_name;
    }
  }
}

void K8sSchema::AddInfo(const Descriptor* type) {
  MessageInfo& info = info_[type];
  for (int f = 0; f < type->field_count(); ++f) {
    const google::protobuf::FieldDescriptor* field = type->field(f);
    const auto number = static_cast<std::size_t>(field->number());
    if (number >= 4096) continue;  // never in Kubernetes types; looked up as unknown
    if (info.fields_by_number.size() <= number) info.fields_by_number.resize(number + 1);
    info.fields_by_number[number] = field;
  }
  info.inline_by_number.assign(info.fields_by_number.size(), false);
  info.json_name_by_number.assign(info.fields_by_number.size(), std::string());
  for (int n = 0; n < type->nested_type_count(); ++n) AddInfo(type->nested_type(n));
}

const MessageInfo& K8sSchema::InfoOf(const Descriptor* type) const {
  static const MessageInfo kUnknown;
  const auto it = info_.find(type);
  return it == info_.end() ? kUnknown : it->second;
}

const Descriptor* K8sSchema::Find(std::string_view api_version, std::string_view kind) const {
  const std::size_t slash = api_version.find('/');
  const std::string_view group =
      slash == std::string_view::npos ? std::string_view() : api_version.substr(0, slash);
  const std::string_view version =
      slash == std::string_view::npos ? api_version : api_version.substr(slash + 1);
  const std::optional<std::string> segment = GroupSegment(group);
  if (!segment) return nullptr;
  return pool_->FindMessageTypeByName("k8s.io.api." + *segment + "." + std::string(version) + "." +
                                      std::string(kind));
}

bool K8sSchema::HasGroupVersion(std::string_view group, std::string_view version) const {
  const std::optional<std::string> segment = GroupSegment(group);
  return segment && pool_->FindFileByName("k8s.io/api/" + *segment + "/" + std::string(version) +
                                          "/generated.proto") != nullptr;
}

}  // namespace fulcrum::kube::protobuf
