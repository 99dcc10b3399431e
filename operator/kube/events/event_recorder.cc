#include "operator/kube/events/event_recorder.h"

#include <cstdio>

#include "common/rfc3339.h"

namespace fulcrum::kube {
namespace {

constexpr std::size_t kMaxNoteBytes = 1024;

nlohmann::json ReferenceTo(const nlohmann::json& object) {
  const nlohmann::json metadata = object.value("metadata", nlohmann::json::object());
  nlohmann::json reference = {{"apiVersion", object.value("apiVersion", "")},
                              {"kind", object.value("kind", "")},
                              {"name", metadata.value("name", "")}};
  for (const char* key : {"namespace", "uid", "resourceVersion"}) {
    if (metadata.contains(key)) reference[key] = metadata[key];
  }
  return reference;
}

std::string ReferenceKey(const nlohmann::json& reference) {
  return reference.value("kind", "") + "/" + reference.value("namespace", "") + "/" +
         reference.value("name", "") + "/" + reference.value("uid", "");
}

}  // namespace

EventRecorder::EventRecorder(std::shared_ptr<ApiClient> client, EventRecorderOptions options)
    : client_(std::move(client)), options_(std::move(options)) {
  worker_ = std::jthread([this](std::stop_token stop) { Work(stop); });
}

EventRecorder::~EventRecorder() {
  Flush();
  {
    // Under the mutex, so the worker cannot miss the stop between its check and its wait.
    std::lock_guard lock(mutex_);
    worker_.request_stop();
  }
  changed_.notify_all();
}

void EventRecorder::Record(const nlohmann::json& regarding, EventType type, std::string reason,
                           std::string action, std::string note) {
  if (note.size() > kMaxNoteBytes) note.resize(kMaxNoteBytes);
  std::lock_guard lock(mutex_);
  if (queue_.size() >= options_.max_queued) {
    log_.Warning("event queue full; dropping event", {{"reason", reason}, {"note", note}});
    return;
  }
  queue_.push_back({ReferenceTo(regarding), type, std::move(reason), std::move(action),
                    std::move(note), options_.clock->WallNow()});
  changed_.notify_all();
}

void EventRecorder::Flush() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [this] { return queue_.empty() && !sending_; });
}

void EventRecorder::Work(std::stop_token stop) {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return !queue_.empty() || stop.stop_requested(); });
    if (queue_.empty()) return;  // stopped and drained
    Pending pending = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    lock.unlock();
    Send(pending);
    lock.lock();
    sending_ = false;
    changed_.notify_all();
  }
}

ClockedTokenBucket& EventRecorder::BucketFor(const std::string& object) {
  if (buckets_.size() > options_.prune_buckets_above && !buckets_.contains(object)) {
    std::erase_if(buckets_, [](const auto& entry) { return entry.second->IsFull(); });
  }
  auto& bucket = buckets_[object];
  if (!bucket)
    bucket = std::make_unique<ClockedTokenBucket>(options_.qps_per_object,
                                                  options_.burst_per_object, options_.clock);
  return *bucket;
}

void EventRecorder::Send(const Pending& pending) {
  const std::string object = ReferenceKey(pending.regarding_reference);
  const std::string type = pending.type == EventType::kWarning ? "Warning" : "Normal";
  const Key key{object, pending.reason, pending.action, type};
  const std::string observed = FormatRfc3339(pending.observed, TimePrecision::kMicroseconds);
  const ResourceType events = resources::Events();
  if (!BucketFor(object).TryAccept()) {
    log_.Info("event rate limit reached; dropping event",
              {{"object", object}, {"reason", pending.reason}});
    return;
  }

  const Clock::TimePoint now = options_.clock->Now();
  std::erase_if(series_, [&](const auto& entry) {
    return now - entry.second.first_seen >= options_.series_window;
  });
  if (auto found = series_.find(key);
      found != series_.end() && now - found->second.first_seen < options_.series_window) {
    Series& series = found->second;
    ++series.count;
    // Only the series changes: an Event's note is immutable, so the first note stands.
    const nlohmann::json patch = {
        {"series", {{"count", series.count}, {"lastObservedTime", observed}}}};
    auto patched =
        client_->Patch(events, series.event_namespace, series.event_name, PatchType::kMerge, patch);
    if (patched.ok()) return;
    if (patched.error().code != ErrorCode::kNotFound) {
      log_.Warning("could not update event series",
                   {{"event", series.event_name}, {"error", patched.error().ToString()}});
      return;
    }
    series_.erase(found);  // the Event expired (event-ttl): start a new one
  }

  std::string event_namespace = pending.regarding_reference.value("namespace", "");
  if (event_namespace.empty()) event_namespace = "default";  // cluster-scoped objects
  char suffix[32];
  std::snprintf(
      suffix, sizeof suffix, ".%llx",
      static_cast<unsigned long long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(pending.observed.time_since_epoch())
              .count()));
  const std::string name = pending.regarding_reference.value("name", "object") + suffix;
  const nlohmann::json event = {{"apiVersion", "events.k8s.io/v1"},
                                {"kind", "Event"},
                                {"metadata", {{"name", name}, {"namespace", event_namespace}}},
                                {"eventTime", observed},
                                {"reportingController", options_.reporting_controller},
                                {"reportingInstance", options_.reporting_instance},
                                {"action", pending.action},
                                {"reason", pending.reason},
                                {"note", pending.note},
                                {"type", type},
                                {"regarding", pending.regarding_reference}};
  auto created = client_->Create(events, event_namespace, event);
  if (!created.ok()) {
    log_.Warning("could not record event",
                 {{"reason", pending.reason}, {"error", created.error().ToString()}});
    return;
  }
  series_[key] = Series{event_namespace, name, 1, now};
}

}  // namespace fulcrum::kube
