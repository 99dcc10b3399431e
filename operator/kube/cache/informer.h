// A cache of one resource kept current by a reflector, with event handlers:
// client-go's SharedIndexInformer.
//
// Threading. Handlers are called with the informer's dispatch lock held, so
// never two at once, whichever thread calls them:
// - on_add/on_update/on_delete for changes: on the informer's reflector thread
//   (the one Start creates), in the order the server made the changes; a
//   re-list delivers its deletions first, then its adds and updates;
// - on_update(old == new) for resyncs: on the informer's resync thread;
// - on_add for the cached objects when a handler is added late: on the thread
//   calling AddEventHandler, before it returns.
// Handlers registered together see every notification in registration order.
// They must be short (enqueue a key) and must not call AddEventHandler or Stop:
// the dispatch lock is not reentrant. Stop returns once the handler running (if
// any) has returned; after Stop, no handler is called.
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

// What on_delete receives: the object's last known state, and whether that is
// the state it was deleted in. client-go hands handlers either the object or a
// cache.DeletedFinalStateUnknown tombstone; here it is one type, derived from
// CachedObject so that a handler taking `const CachedObject&` still works.
struct DeletedObject : CachedObject {
  DeletedObject(CachedObject last_state, bool unknown_final_state)
      : CachedObject(std::move(last_state)), final_state_unknown(unknown_final_state) {}
  // False: from the watch's DELETED event, the object as it was deleted.
  // True: the tombstone of a deletion learnt from a re-list (the watch missed
  // it, e.g. across a 410); the object is as this cache last held it, and
  // whatever changed between that and the deletion is unknown.
  bool final_state_unknown = false;
};

struct ResourceEventHandler {
  std::function<void(const CachedObject& object)> on_add;
  // Also called with old == new on every periodic resync.
  std::function<void(const CachedObject& old_object, const CachedObject& new_object)> on_update;
  // The DELETED event's object, or the tombstone of a deletion learnt from a
  // re-list (`deleted.final_state_unknown`).
  std::function<void(const DeletedObject& deleted)> on_delete;
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
  // Stops the reflector and resync threads and waits for them: a list or watch
  // in flight, a client-side rate-limit wait and a Retry-After sleep are all
  // abandoned, so this returns promptly (after the handler running, if any).
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
