// Keeps a sink in step with the server: list, then watch from the list's
// resourceVersion; resume the watch from the last resourceVersion seen when a
// stream ends or breaks; re-list on 410 Gone (HTTP or in-stream); back off
// with jitter between failures. client-go's Reflector.ListAndWatch.
// resourceVersion is opaque: it is stored and sent back, never ordered.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "operator/kube/client/api_client.h"
#include "operator/kube/util/backoff.h"
#include "operator/kube/cache/cached_object.h"
#include "operator/kube/util/clock.h"
#include "common/log.h"

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
  int page_size = 500;  // list in pages of this many objects (consistent reads)
  // The first list asks for resourceVersion "0", which the API server answers
  // from its watch cache in one response (as client-go does); later lists
  // (after a 410 or an error) are consistent reads from etcd, in pages.
  bool initial_list_from_cache = true;
  // Each watch asks the server to end it after a random time in [min, 2*min),
  // as client-go does, so that watches of many clients do not end together.
  std::chrono::seconds min_watch_timeout{300};
  bool allow_watch_bookmarks = true;
  BackoffPolicy backoff{};
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
  int lists = 0;            // complete lists (initial and re-lists)
  int watches = 0;          // watch requests that were accepted
  int stream_ends = 0;      // watches the server ended normally (timeout)
  int stream_failures = 0;  // watches that broke (connection lost, bad data)
  int expired = 0;          // 410 Gone seen (HTTP or in-stream): re-list followed
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
  ReflectorStats stats_;
};

}  // namespace fulcrum::kube
