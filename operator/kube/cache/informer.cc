#include "operator/kube/cache/informer.h"

#include <unordered_map>

namespace fulcrum::kube {

Informer::Informer(std::shared_ptr<ApiClient> client, ResourceType type, InformerOptions options)
    : options_(std::move(options)),
      reflector_(std::move(client), std::move(type), options_.ns, options_.reflector, *this) {
  (void)store_.AddIndex(indexes::kNamespace, indexes::ByNamespace());
}

Informer::~Informer() {
  Stop();
}

void Informer::AddEventHandler(ResourceEventHandler handler) {
  std::lock_guard lock(dispatch_mutex_);
  if (handler.on_add) {
    for (const auto& object : store_.List()) handler.on_add(object);
  }
  handlers_.push_back(std::move(handler));
}

void Informer::Start() {
  if (reflector_thread_.joinable()) return;
  reflector_thread_ = std::jthread([this](std::stop_token stop) { reflector_.Run(stop); });
  if (options_.resync_period.count() > 0) {
    resync_thread_ = std::jthread([this](std::stop_token stop) { RunResync(stop); });
  }
}

void Informer::Stop() {
  // Resync first: it reads the store that the reflector writes.
  if (resync_thread_.joinable()) {
    resync_thread_.request_stop();
    resync_thread_.join();
  }
  if (reflector_thread_.joinable()) {
    reflector_thread_.request_stop();
    reflector_thread_.join();
  }
}

bool Informer::HasSynced() const {
  std::lock_guard lock(synced_mutex_);
  return synced_;
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(synced_mutex_);
  return synced_changed_.wait_for(lock, timeout, [this] { return synced_; });
}

void Informer::Replace(std::vector<CachedObject> objects, const std::string& resource_version) {
  std::lock_guard lock(dispatch_mutex_);
  std::unordered_map<std::string, CachedObject> previous;
  for (auto& object : store_.List()) previous.emplace(object.key(), std::move(object));
  std::vector<std::pair<std::optional<CachedObject>, CachedObject>> changes;  // (old, new)
  for (const auto& object : objects) {
    const auto old = previous.find(object.key());
    if (old == previous.end()) {
      changes.emplace_back(std::nullopt, object);
    } else {
      // Equality only: resourceVersions are opaque.
      if (old->second.resource_version() != object.resource_version()) {
        changes.emplace_back(old->second, object);
      }
      previous.erase(old);
    }
  }
  store_.Replace(std::move(objects));
  for (const auto& [key, gone] : previous) {
    const DeletedObject tombstone(gone, /*unknown_final_state=*/true);
    for (const auto& handler : handlers_) {
      if (handler.on_delete) handler.on_delete(tombstone);
    }
  }
  for (const auto& [old, now] : changes) {
    for (const auto& handler : handlers_) {
      if (!old && handler.on_add) handler.on_add(now);
      if (old && handler.on_update) handler.on_update(*old, now);
    }
  }
  log_.Debug("replaced cache from list", {{"objects", store_.size()},
                                          {"resource_version", resource_version},
                                          {"changes", changes.size()},
                                          {"deleted", previous.size()}});
  std::lock_guard synced_lock(synced_mutex_);
  if (!synced_) {
    synced_ = true;
    synced_changed_.notify_all();
  }
}

void Informer::Added(CachedObject object) {
  Modified(std::move(object));
}

void Informer::Modified(CachedObject object) {
  std::lock_guard lock(dispatch_mutex_);
  const std::optional<CachedObject> old = store_.Upsert(object);
  if (old && old->resource_version() == object.resource_version()) return;  // already known
  for (const auto& handler : handlers_) {
    if (!old && handler.on_add) handler.on_add(object);
    if (old && handler.on_update) handler.on_update(*old, object);
  }
}

void Informer::Deleted(CachedObject last_state) {
  std::lock_guard lock(dispatch_mutex_);
  if (!store_.Remove(last_state.key())) return;  // never seen, or already gone
  const DeletedObject deleted(std::move(last_state), /*unknown_final_state=*/false);
  for (const auto& handler : handlers_) {
    if (handler.on_delete) handler.on_delete(deleted);
  }
}

void Informer::Resync() {
  std::lock_guard lock(dispatch_mutex_);
  for (const auto& object : store_.List()) {
    for (const auto& handler : handlers_) {
      if (handler.on_update) handler.on_update(object, object);
    }
  }
}

void Informer::RunResync(std::stop_token stop) {
  const auto& clock = options_.reflector.clock;
  while (clock->SleepFor(options_.resync_period, stop)) {
    if (HasSynced()) Resync();
  }
}

}  // namespace fulcrum::kube
