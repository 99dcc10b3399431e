#include "operator/kube/cached_object.h"

#include "operator/kube/object_meta.h"
#include "operator/kube/protobuf/k8s_schema.h"
#include "operator/kube/protobuf/msgpack_writer.h"
#include "operator/kube/protobuf/transcoder.h"

namespace fulcrum::kube {

CachedObject CachedObject::FromJson(const nlohmann::json& object) {
  auto data = std::make_shared<Data>();
  const nlohmann::json& metadata = MetadataOf(object);
  const std::string ns = NamespaceOf(object);
  data->key = ObjectKey(object);
  data->name_offset = ns.empty() ? 0 : ns.size() + 1;
  data->uid = UidOf(object);
  data->resource_version = ResourceVersionOf(object);
  if (const auto labels = metadata.find("labels");
      labels != metadata.end() && labels->is_object()) {
    for (const auto& [label, value] : labels->items()) {
      data->labels.emplace_back(label, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  if (const auto owners = metadata.find("ownerReferences");
      owners != metadata.end() && owners->is_array()) {
    for (const auto& owner : *owners) {
      if (owner.is_object()) data->owner_uids.push_back(StringField(owner, "uid"));
    }
  }
  data->encoded = nlohmann::json::to_msgpack(object);
  data->encoded.shrink_to_fit();  // the encoder grows by doubling; keep only what is used
  data->labels.shrink_to_fit();
  return CachedObject(std::move(data));
}

CachedObject CachedObject::FromProtobuf(ObjectIdentity identity,
                                       const google::protobuf::Descriptor* type,
                                       std::string_view wire) {
  auto data = std::make_shared<Data>();
  data->name_offset = identity.ns.empty() ? 0 : identity.ns.size() + 1;
  data->key = identity.ns.empty() ? std::move(identity.name) : identity.ns + "/" + identity.name;
  data->uid = std::move(identity.uid);
  data->resource_version = std::move(identity.resource_version);
  data->labels = std::move(identity.labels);
  data->labels.shrink_to_fit();
  data->owner_uids = std::move(identity.owner_uids);
  data->encoded.assign(wire.begin(), wire.end());
  data->protobuf_type = type;
  return CachedObject(std::move(data));
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
