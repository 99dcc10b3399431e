// Records events.k8s.io/v1 Events about objects, as client-go's
// tools/events recorder does:
// - asynchronous: Record never blocks on the API server (a bounded queue;
//   overflow is dropped and logged);
// - aggregation: a repeat of an event (same regarding object, reason, action,
//   type and controller) within series_window becomes a series on the first
//   Event (series.count, series.lastObservedTime) instead of a new object;
// - rate limit: a token bucket per regarding object (the spam filter), so one
//   misbehaving object cannot flood the API server. Buckets that have refilled
//   are forgotten once there are many, so memory does not grow with every
//   object ever seen.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>

#include "common/log.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/util/clock.h"
#include "operator/kube/util/clocked_token_bucket.h"

namespace fulcrum::kube {

enum class EventType { kNormal, kWarning };

struct EventRecorderOptions {
  std::string reporting_controller = "fulcrum.dev/operator";  // a qualified name
  std::string reporting_instance;                             // e.g. the pod name
  // Per regarding object: client-go's spam filter allows a burst of 25, then
  // one event per 5 minutes.
  double qps_per_object = 1.0 / 300.0;
  int burst_per_object = 25;
  std::chrono::minutes series_window{6};
  std::size_t max_queued = 1000;
  // Past this many objects with a bucket, buckets that have refilled completely are
  // forgotten (a full bucket is the same as a new one), so memory stays bounded by the
  // objects that were recently noisy.
  std::size_t prune_buckets_above = 4096;
  std::shared_ptr<const Clock> clock = SystemClock();
};

class EventRecorder {
 public:
  EventRecorder(std::shared_ptr<ApiClient> client, EventRecorderOptions options);
  ~EventRecorder();  // sends what is queued, then stops
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // `regarding` is the object the event is about (its metadata and kind are used).
  // `note` is truncated to the 1 kB the API allows.
  void Record(const nlohmann::json& regarding, EventType type, std::string reason,
              std::string action, std::string note);

  // Blocks until everything recorded so far has been sent (or dropped).
  void Flush();

 private:
  struct Pending {
    nlohmann::json regarding_reference;
    EventType type;
    std::string reason, action, note;
    std::chrono::system_clock::time_point observed;
  };
  // Isomorphic events share a key; the note may differ.
  using Key = std::tuple<std::string, std::string, std::string,
                         std::string>;  // regarding uid/key, reason, action, type
  struct Series {
    std::string event_namespace, event_name;
    int count = 1;
    Clock::TimePoint first_seen;
  };

  void Work(std::stop_token stop);
  void Send(const Pending& pending);
  ClockedTokenBucket& BucketFor(const std::string& object);

 public:
  // For tests: how many objects have a bucket now.
  std::size_t tracked_objects_for_test() const { return buckets_.size(); }

 private:
  std::shared_ptr<ApiClient> client_;
  EventRecorderOptions options_;
  log::Logger log_{"kube.events"};

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> queue_;
  bool sending_ = false;

  // Touched by the worker thread only.
  std::map<Key, Series> series_;
  std::map<std::string, std::unique_ptr<ClockedTokenBucket>> buckets_;

  std::jthread worker_;  // last: started after everything it uses exists
};

}  // namespace fulcrum::kube
