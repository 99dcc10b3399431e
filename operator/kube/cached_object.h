// An object as the informer cache holds it. Identity and index inputs
// (namespace, name, uid, resourceVersion, labels, owner uids) are decoded once;
// the whole object is kept as MessagePack, several times smaller than a
// parsed nlohmann::json tree, and decoded only when a caller asks for it.
// Immutable and cheap to copy (shared), so readers never block writers.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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
  // An object already encoded as the MessagePack of its JSON form, with its identity.
  static CachedObject FromEncoded(ObjectIdentity identity, std::vector<std::uint8_t> encoded);

  // "namespace/name", or "name" for cluster-scoped objects (client-go's
  // MetaNamespaceKeyFunc).
  const std::string& key() const { return data_->key; }
  std::string_view ns() const;
  std::string_view name() const;
  const std::string& uid() const { return data_->uid; }
  const std::string& resource_version() const { return data_->resource_version; }
  const std::vector<std::pair<std::string, std::string>>& labels() const { return data_->labels; }
  const std::vector<std::string>& owner_uids() const { return data_->owner_uids; }

  // The full object, decoded.
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
  };
  explicit CachedObject(std::shared_ptr<const Data> data) : data_(std::move(data)) {}
  std::shared_ptr<const Data> data_;
};

}  // namespace fulcrum::kube
