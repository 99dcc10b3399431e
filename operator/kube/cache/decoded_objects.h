// What a caller reads out of cached objects, kept per object uid and resourceVersion, so an
// object that has not changed since the last look is not decoded again. The cache keeps objects
// encoded (cached_object.h) and decoding is most of a reconcile's CPU when done on every look:
// at 50 jobs, the trainer pods of each job decoded on every reconcile were a fifth of the
// controller's CPU (docs/benchmarks.md, "Operator at scale"). Each call names the whole set the
// caller cares about; entries for objects not in it are forgotten, so memory follows the cache.
// Safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "operator/kube/cache/cached_object.h"

namespace fulcrum::kube {

template <typename Value>
class DecodedObjects {
 public:
  // The values of `objects`, in their order; `read(object.ToJson())` runs only for objects new
  // or changed since the last call.
  template <typename Read>
  std::vector<Value> Values(const std::vector<CachedObject>& objects, Read&& read) {
    std::vector<Value> values;
    values.reserve(objects.size());
    std::unordered_map<std::string, Entry> current;
    current.reserve(objects.size());
    std::lock_guard lock(mutex_);
    for (const CachedObject& object : objects) {
      auto known = by_uid_.find(object.uid());
      Entry entry;
      if (known != by_uid_.end() && known->second.resource_version == object.resource_version()) {
        entry = std::move(known->second);
      } else {
        entry = Entry{object.resource_version(), read(object.ToJson())};
        ++decoded_;
      }
      values.push_back(entry.value);
      current.emplace(object.uid(), std::move(entry));
    }
    by_uid_ = std::move(current);
    return values;
  }

  // How many object versions were decoded so far (tests: unchanged objects are not decoded).
  uint64_t decoded() const {
    std::lock_guard lock(mutex_);
    return decoded_;
  }

 private:
  struct Entry {
    std::string resource_version;
    Value value;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> by_uid_;
  uint64_t decoded_ = 0;
};

}  // namespace fulcrum::kube
