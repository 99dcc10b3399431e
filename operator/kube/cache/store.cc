#include "operator/kube/cache/store.h"

#include <mutex>

namespace fulcrum::kube {

namespace indexes {
IndexFunction ByNamespace() {
  return [](const CachedObject& object) {
    return object.ns().empty() ? std::vector<std::string>{}
                               : std::vector<std::string>{std::string(object.ns())};
  };
}
IndexFunction ByOwnerUid() {
  return [](const CachedObject& object) { return object.owner_uids(); };
}
std::string LabelValue(std::string_view key, std::string_view value) {
  return std::string(key) + "=" + std::string(value);
}
IndexFunction ByLabel() {
  return [](const CachedObject& object) {
    std::vector<std::string> values;
    values.reserve(object.labels().size());
    for (const auto& [key, value] : object.labels()) values.push_back(LabelValue(key, value));
    return values;
  };
}
}  // namespace indexes

void Store::IndexLocked(const CachedObject& object) {
  for (auto& [name, index] : indexes_) {
    for (auto& value : index.function(object))
      index.keys_by_value[std::move(value)].insert(object.key());
  }
}

void Store::UnindexLocked(const CachedObject& object) {
  for (auto& [name, index] : indexes_) {
    for (const auto& value : index.function(object)) {
      const auto keys = index.keys_by_value.find(value);
      if (keys == index.keys_by_value.end()) continue;
      keys->second.erase(object.key());
      if (keys->second.empty()) index.keys_by_value.erase(keys);
    }
  }
}

Status Store::AddIndex(const std::string& name, IndexFunction function) {
  std::unique_lock lock(mutex_);
  if (indexes_.contains(name)) {
    return MakeError(ErrorCode::kAlreadyExists, "index '" + name + "' already exists");
  }
  Index& index = indexes_[name];
  index.function = std::move(function);
  for (const auto& [key, object] : objects_) {
    for (auto& value : index.function(object)) index.keys_by_value[std::move(value)].insert(key);
  }
  return Ok();
}

std::optional<CachedObject> Store::Upsert(CachedObject object) {
  std::unique_lock lock(mutex_);
  std::optional<CachedObject> previous;
  if (auto it = objects_.find(object.key()); it != objects_.end()) {
    previous = it->second;
    UnindexLocked(it->second);
    it->second = object;
  } else {
    objects_.emplace(object.key(), object);
  }
  IndexLocked(object);
  return previous;
}

std::optional<CachedObject> Store::Remove(const std::string& key) {
  std::unique_lock lock(mutex_);
  const auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  CachedObject removed = it->second;
  UnindexLocked(removed);
  objects_.erase(it);
  return removed;
}

void Store::Replace(std::vector<CachedObject> objects) {
  std::unique_lock lock(mutex_);
  objects_.clear();
  for (auto& [name, index] : indexes_) index.keys_by_value.clear();
  objects_.reserve(objects.size());
  for (auto& object : objects) {
    IndexLocked(object);
    std::string key = object.key();
    objects_.insert_or_assign(std::move(key), std::move(object));
  }
}

std::optional<CachedObject> Store::Get(const std::string& key) const {
  std::shared_lock lock(mutex_);
  const auto it = objects_.find(key);
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

std::vector<CachedObject> Store::List() const {
  std::shared_lock lock(mutex_);
  std::vector<CachedObject> all;
  all.reserve(objects_.size());
  for (const auto& [key, object] : objects_) all.push_back(object);
  return all;
}

std::vector<std::string> Store::Keys() const {
  std::shared_lock lock(mutex_);
  std::vector<std::string> keys;
  keys.reserve(objects_.size());
  for (const auto& [key, object] : objects_) keys.push_back(key);
  return keys;
}

std::size_t Store::size() const {
  std::shared_lock lock(mutex_);
  return objects_.size();
}

Result<std::vector<CachedObject>> Store::ByIndex(const std::string& index,
                                                 const std::string& value) const {
  std::shared_lock lock(mutex_);
  const auto found = indexes_.find(index);
  if (found == indexes_.end())
    return MakeError(ErrorCode::kNotFound, "no index named '" + index + "'");
  std::vector<CachedObject> matches;
  if (const auto keys = found->second.keys_by_value.find(value);
      keys != found->second.keys_by_value.end()) {
    for (const auto& key : keys->second) matches.push_back(objects_.at(key));
  }
  return matches;
}

Result<std::vector<std::string>> Store::IndexValues(const std::string& index) const {
  std::shared_lock lock(mutex_);
  const auto found = indexes_.find(index);
  if (found == indexes_.end())
    return MakeError(ErrorCode::kNotFound, "no index named '" + index + "'");
  std::vector<std::string> values;
  for (const auto& [value, keys] : found->second.keys_by_value) values.push_back(value);
  return values;
}

}  // namespace fulcrum::kube
