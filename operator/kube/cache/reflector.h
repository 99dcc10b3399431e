// Keeps a sink in step with the server: list, then watch from the list's
// resourceVersion; resume the watch from the last resourceVersion seen when a
// stream ends or breaks; re-list on 410 Gone (HTTP or in-stream); back off
// with jitter between failures. client-go's Reflector.ListAndWatch.
// resourceVersion is opaque: it is stored and sent back, never ordered.
//
// Which version a list asks for (client-go's relistResourceVersion):
// - the first list: "0", any version the server has (its watch cache), in one response;
// - later lists (after a watch's 410, or after any other error): the last synced
//   version, not older than it, in one response, which the API server answers from
//   its watch cache instead of reading etcd (client-go turns paging off for this, as
//   a paged read at a version would be an exact read from etcd);
// - if a list at that version fails with 410 (or "too large resource version"):
//   "" at once, a consistent read from etcd in pages, which always makes progress.
// A 410 on a later page of a paged list (its continue token expired) reads the
// list again whole (ListAllPages).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "common/backoff.h"
#include "common/log.h"
#include "operator/kube/cache/cached_object.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/util/clock.h"

namespace fulcrum::kube {

// Where the reflector delivers what it learns. Called from the reflector's thread only.
class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // A complete, consistent snapshot (a list) at `resource_version`.
  virtual void Replace(std::vector<CachedObject> objects, const std::string& resource_version) = 0;
  virtual void Added(CachedObject object) = 0;
  virtual void Modified(CachedObject object) = 0;
  virtual void Deleted(CachedObject last_state) = 0;
};

struct ReflectorOptions {
  std::string label_selector;
  std::string field_selector;
  int page_size = 500;  // consistent reads (resourceVersion "") are read in pages of this many
  // The first list asks for resourceVersion "0", which the API server answers
  // from its watch cache in one response (as client-go does). False: the first
  // list is a consistent read, in pages. Later lists: see the file comment.
  bool initial_list_from_cache = true;
  // Each watch asks the server to end it after a random time in [min, 2*min),
  // as client-go does, so that watches of many clients do not end together.
  std::chrono::seconds min_watch_timeout{300};
  bool allow_watch_bookmarks = true;
  // Between failed lists and broken watches: client-go's reflector back-off, 800 ms doubling
  // up to 30 s, each wait stretched by up to as much again (wait.Jitter with factor 1).
  BackoffPolicy backoff{.initial = std::chrono::milliseconds(800),
                        .max = std::chrono::seconds(30),
                        .jitter_low = 1.0,
                        .jitter_high = 2.0};
  // A watch the server ends normally sooner than this after it began, with no
  // event (bookmarks included), is treated as a failure and resumed after
  // back-off, not at once: a proxy or a server that closes watches at once would
  // otherwise be called in a hot loop (client-go's "very short watch", 1 s).
  std::chrono::milliseconds min_watch_duration{1000};
  // Applied to every object before it is cached, e.g. to drop managedFields.
  // With a transform, lists are read as JSON.
  std::function<void(nlohmann::json&)> transform;
  // Lists of built-in types are read in Kubernetes' protobuf encoding (watches
  // stay JSON). kJson forces JSON everywhere.
  ListEncoding list_encoding = ListEncoding::kProtobufForBuiltIns;
  std::shared_ptr<const Clock> clock = SystemClock();
};

// Counters for tests and metrics.
struct ReflectorStats {
  int lists = 0;               // complete lists (initial and re-lists)
  int watches = 0;             // watch requests that were accepted
  int stream_ends = 0;         // watches the server ended normally (timeout)
  int stream_failures = 0;     // watches that broke (connection lost, bad data)
  int expired = 0;             // 410 Gone seen (HTTP or in-stream): re-list followed
  int very_short_watches = 0;  // ended normally, too soon and empty: resumed after back-off
  int failures = 0;            // lists and watches that failed otherwise: re-list after back-off
  // Full lists read whole because a continue token expired mid-way (ListAllPages).
  int full_lists_after_expired_page = 0;
  // The resourceVersion the last list request asked for: "0" (any), the last
  // synced version (not older than it), or "" (a consistent read).
  std::string last_list_requested_version;
  int bookmarks = 0;
  long long events = 0;  // ADDED/MODIFIED/DELETED delivered
};

class Reflector {
 public:
  Reflector(std::shared_ptr<ApiClient> client, ResourceType type, std::string ns,
            ReflectorOptions options, ReflectorSink& sink);

  // Runs until `stop` is requested. Blocking; run it on its own thread.
  void Run(std::stop_token stop);

  // The resourceVersion the sink is in step with ("" before the first list).
  std::string LastSyncResourceVersion() const;
  ReflectorStats stats() const;

 private:
  // One list followed by watches until an error that needs a re-list.
  Status ListAndWatch(std::stop_token stop);
  Status ListInto(std::stop_token stop);
  // One list (all its pages) at `version` into the sink.
  Status ListAt(const std::string& version, std::stop_token stop);
  // Watches from the last version until the stream fails; kExpired => re-list.
  Status WatchOnce(std::stop_token stop);
  CachedObject Cache(nlohmann::json object) const;
  void SetLastVersion(std::string version);

  std::shared_ptr<ApiClient> client_;
  ResourceType type_;
  std::string namespace_;
  ReflectorOptions options_;
  ReflectorSink& sink_;
  log::Logger log_;
  std::mt19937_64 random_;

  mutable std::mutex mutex_;  // guards last_version_ and stats_
  std::string last_version_;
  // A list at last_version_ failed with 410: the next list is a consistent read
  // (client-go's isLastSyncResourceVersionUnavailable).
  bool last_version_unavailable_ = false;
  ReflectorStats stats_;
};

}  // namespace fulcrum::kube
