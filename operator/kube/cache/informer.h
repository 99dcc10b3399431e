// A cache of one resource kept current by a reflector, with event handlers:
// client-go's SharedIndexInformer. Handlers run on the informer's thread, one
// at a time and in the order of changes; keep them short (enqueue a key).
//
// Differences from client-go, on purpose:
// - After a re-list, an object whose resourceVersion did not change gets no
//   update notification; one that changed gets exactly one. So a handler sees
//   each change once even across 410s (intermediate versions that the server
//   compacted away are, of course, not seen).
// - Handlers are called synchronously (no per-handler buffer).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "operator/kube/cache/reflector.h"
#include "operator/kube/cache/store.h"

namespace fulcrum::kube {

struct ResourceEventHandler {
  std::function<void(const CachedObject& object)> on_add;
  // Also called with old == new on every periodic resync.
  std::function<void(const CachedObject& old_object, const CachedObject& new_object)> on_update;
  // `last_state`: the object as the server last reported it (the DELETED
  // event's object), or as cached if the deletion was learnt from a re-list.
  std::function<void(const CachedObject& last_state)> on_delete;
};

struct InformerOptions {
  std::string ns;  // empty: all namespaces
  ReflectorOptions reflector;
  // Every period, each cached object is re-delivered to on_update, so that
  // level-triggered controllers re-check the world. Zero: never.
  std::chrono::milliseconds resync_period{0};
};

class Informer final : private ReflectorSink {
 public:
  Informer(std::shared_ptr<ApiClient> client, ResourceType type, InformerOptions options = {});
  ~Informer() override;  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // The namespace index exists from the start; add others before Start.
  Status AddIndex(const std::string& name, IndexFunction function) {
    return store_.AddIndex(name, std::move(function));
  }
  // A handler added after the cache is filled first gets on_add for every
  // cached object, as in client-go.
  void AddEventHandler(ResourceEventHandler handler);

  void Start();
  void Stop();
  // True once the first list has been delivered to the store and handlers.
  bool HasSynced() const;
  // Waits for HasSynced; false on timeout.
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  const Store& store() const { return store_; }
  const Reflector& reflector() const { return reflector_; }

 private:
  void Replace(std::vector<CachedObject> objects, const std::string& resource_version) override;
  void Added(CachedObject object) override;
  void Modified(CachedObject object) override;
  void Deleted(CachedObject last_state) override;
  void Resync();
  void RunResync(std::stop_token stop);

  InformerOptions options_;
  Store store_;
  Reflector reflector_;
  log::Logger log_{"kube.informer"};

  std::mutex dispatch_mutex_;  // one notification at a time; guards handlers_
  std::vector<ResourceEventHandler> handlers_;

  mutable std::mutex synced_mutex_;
  mutable std::condition_variable synced_changed_;
  bool synced_ = false;

  std::jthread reflector_thread_;
  std::jthread resync_thread_;
};

}  // namespace fulcrum::kube
