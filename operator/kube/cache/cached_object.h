// An object as the informer cache holds it. Identity and index inputs
// (namespace, name, uid, resourceVersion, labels, owner uids) are decoded once;
// the whole object is kept encoded, several times smaller than a parsed
// nlohmann::json tree, and decoded only when a caller asks for it: as
// MessagePack of its JSON form, or, for built-in objects listed in protobuf,
// as the protobuf bytes the server sent (smaller still, and nothing to convert
// until someone reads it). Immutable and cheap to copy (shared), so readers
// never block writers.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace google::protobuf {
class Descriptor;
}

namespace fulcrum::kube {

// What the cache decodes of an object's metadata (the rest stays encoded).
struct ObjectIdentity {
  std::string ns;
  std::string name;
  std::string uid;
  std::string resource_version;
  std::vector<std::pair<std::string, std::string>> labels;
  std::vector<std::string> owner_uids;
};

class CachedObject {
 public:
  static CachedObject FromJson(const nlohmann::json& object);
  // A built-in object in protobuf wire format (`type` from protobuf::K8sSchema), with its
  // identity; ToJson() transcodes it.
  static CachedObject FromProtobuf(ObjectIdentity identity, const google::protobuf::Descriptor* type,
                                   std::string_view wire);

  // "namespace/name", or "name" for cluster-scoped objects (client-go's
  // MetaNamespaceKeyFunc).
  const std::string& key() const { return data_->key; }
  std::string_view ns() const;
  std::string_view name() const;
  const std::string& uid() const { return data_->uid; }
  const std::string& resource_version() const { return data_->resource_version; }
  const std::vector<std::pair<std::string, std::string>>& labels() const { return data_->labels; }
  const std::vector<std::string>& owner_uids() const { return data_->owner_uids; }

  // The full object, decoded (null if stored protobuf bytes do not decode, which the
  // list decoder's checks make unreachable for what the server sent).
  nlohmann::json ToJson() const;
  std::size_t encoded_size() const { return data_->encoded.size(); }

 private:
  struct Data {
    std::string key;
    std::size_t name_offset = 0;  // where the name starts in key
    std::string uid;
    std::string resource_version;
    std::vector<std::pair<std::string, std::string>> labels;
    std::vector<std::string> owner_uids;
    std::vector<std::uint8_t> encoded;
    const google::protobuf::Descriptor* protobuf_type = nullptr;  // set: `encoded` is protobuf
  };
  explicit CachedObject(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  static CachedObject Make(ObjectIdentity identity, std::vector<std::uint8_t> encoded,
                           const google::protobuf::Descriptor* protobuf_type);
  std::shared_ptr<const Data> data_;
};

}  // namespace fulcrum::kube
