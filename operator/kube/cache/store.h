// The informer's cache: a thread-safe map from key to object with secondary
// indexes (client-go's ThreadSafeStore + Indexer). Knows nothing of HTTP.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "operator/kube/cache/cached_object.h"

namespace fulcrum::kube {

// The values under which an object is indexed (may be none, or several).
using IndexFunction = std::function<std::vector<std::string>(const CachedObject&)>;

namespace indexes {
inline constexpr const char* kNamespace = "namespace";
inline constexpr const char* kOwnerUid = "owner-uid";
inline constexpr const char* kLabel = "label";  // values "key=value"
IndexFunction ByNamespace();
IndexFunction ByOwnerUid();
IndexFunction ByLabel();
std::string LabelValue(std::string_view key, std::string_view value);
}  // namespace indexes

class Store {
 public:
  // Adds an index and indexes what is already stored. Fails if the name is taken.
  Status AddIndex(const std::string& name, IndexFunction function);

  // Inserts or replaces; returns the previous object under that key.
  std::optional<CachedObject> Upsert(CachedObject object);
  // Removes; returns what was stored.
  std::optional<CachedObject> Remove(const std::string& key);
  // Makes the store hold exactly `objects` (after a list).
  void Replace(std::vector<CachedObject> objects);

  std::optional<CachedObject> Get(const std::string& key) const;
  std::vector<CachedObject> List() const;
  std::vector<std::string> Keys() const;
  std::size_t size() const;
  // Objects whose index `index` yields `value`; kNotFound for an unknown index.
  Result<std::vector<CachedObject>> ByIndex(const std::string& index,
                                            const std::string& value) const;
  Result<std::vector<std::string>> IndexValues(const std::string& index) const;

 private:
  struct Index {
    IndexFunction function;
    std::unordered_map<std::string, std::unordered_set<std::string>> keys_by_value;
  };
  void IndexLocked(const CachedObject& object);
  void UnindexLocked(const CachedObject& object);

  mutable std::shared_mutex mutex_;
  std::unordered_map<std::string, CachedObject> objects_;
  std::map<std::string, Index> indexes_;
};

}  // namespace fulcrum::kube
