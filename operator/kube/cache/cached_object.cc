#include "operator/kube/cache/cached_object.h"

#include "operator/kube/client/object_meta.h"
#include "operator/kube/protobuf/k8s_schema.h"
#include "operator/kube/protobuf/msgpack_writer.h"
#include "operator/kube/protobuf/transcoder.h"

namespace fulcrum::kube {

namespace {
ObjectIdentity IdentityOf(const nlohmann::json& object) {
  ObjectIdentity identity;
  const nlohmann::json& metadata = MetadataOf(object);
  identity.ns = NamespaceOf(object);
  identity.name = NameOf(object);
  identity.uid = UidOf(object);
  identity.resource_version = ResourceVersionOf(object);
  if (const auto labels = metadata.find("labels");
      labels != metadata.end() && labels->is_object()) {
    for (const auto& [label, value] : labels->items()) {
      identity.labels.emplace_back(label, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  if (const auto owners = metadata.find("ownerReferences");
      owners != metadata.end() && owners->is_array()) {
    for (const auto& owner : *owners) {
      if (owner.is_object()) identity.owner_uids.push_back(StringField(owner, "uid"));
    }
  }
  return identity;
}
}  // namespace

CachedObject CachedObject::Make(ObjectIdentity identity, std::vector<std::uint8_t> encoded,
                                const google::protobuf::Descriptor* protobuf_type) {
  auto data = std::make_shared<Data>();
  data->name_offset = identity.ns.empty() ? 0 : identity.ns.size() + 1;
  data->key = identity.ns.empty() ? std::move(identity.name) : identity.ns + "/" + identity.name;
  data->uid = std::move(identity.uid);
  data->resource_version = std::move(identity.resource_version);
  data->labels = std::move(identity.labels);
  data->labels.shrink_to_fit();
  data->owner_uids = std::move(identity.owner_uids);
  data->encoded = std::move(encoded);
  data->encoded.shrink_to_fit();  // encoders grow by doubling; keep only what is used
  data->protobuf_type = protobuf_type;
  return CachedObject(std::move(data));
}

CachedObject CachedObject::FromJson(const nlohmann::json& object) {
  return Make(IdentityOf(object), nlohmann::json::to_msgpack(object), nullptr);
}

CachedObject CachedObject::FromProtobuf(ObjectIdentity identity,
                                       const google::protobuf::Descriptor* type,
                                       std::string_view wire) {
  return Make(std::move(identity), std::vector<std::uint8_t>(wire.begin(), wire.end()), type);
}

std::string_view CachedObject::ns() const {
  if (data_->name_offset == 0) return {};
  return std::string_view(data_->key).substr(0, data_->name_offset - 1);
}

std::string_view CachedObject::name() const {
  return std::string_view(data_->key).substr(data_->name_offset);
}

nlohmann::json CachedObject::ToJson() const {
  if (data_->protobuf_type == nullptr) return nlohmann::json::from_msgpack(data_->encoded);
  std::vector<std::uint8_t> msgpack;
  msgpack.reserve(data_->encoded.size() * 7 / 4);
  protobuf::MsgpackWriter out(msgpack);
  const std::string_view wire(reinterpret_cast<const char*>(data_->encoded.data()),
                              data_->encoded.size());
  if (!protobuf::TranscodeMessage(protobuf::K8sSchema::BuiltIn(), *data_->protobuf_type, wire, out)
           .ok()) {
    return nullptr;
  }
  return nlohmann::json::from_msgpack(msgpack);
}

}  // namespace fulcrum::kube
