#include "operator/kube/cache/reflector.h"

#include "operator/kube/client/list_pager.h"

namespace fulcrum::kube {

Reflector::Reflector(std::shared_ptr<ApiClient> client, ResourceType type, std::string ns,
                     ReflectorOptions options, ReflectorSink& sink)
    : client_(std::move(client)),
      type_(std::move(type)),
      namespace_(std::move(ns)),
      options_(std::move(options)),
      sink_(sink),
      log_("kube.reflector"),
      random_(std::random_device{}()) {}

std::string Reflector::LastSyncResourceVersion() const {
  std::lock_guard lock(mutex_);
  return last_version_;
}

ReflectorStats Reflector::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void Reflector::SetLastVersion(std::string version) {  // from watch events
  std::lock_guard lock(mutex_);
  last_version_ = std::move(version);
}

CachedObject Reflector::Cache(nlohmann::json object) const {
  if (options_.transform) options_.transform(object);
  return CachedObject::FromJson(object);
}

void Reflector::Run(std::stop_token stop) {
  Backoff backoff(options_.backoff);
  const nlohmann::json where = {{"resource", type_.GroupVersion() + "/" + type_.resource},
                                {"namespace", namespace_}};
  while (!stop.stop_requested()) {
    const Status status = ListAndWatch(stop);
    if (stop.stop_requested()) break;
    if (status.ok() || status.error().code == ErrorCode::kExpired) {
      // A 410 needs a fresh list now; waiting would only widen the gap.
      backoff.Reset();
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      ++stats_.failures;
    }
    const auto wait = backoff.Next();
    nlohmann::json fields = where;
    fields["error"] = status.error().ToString();
    fields["retry_in_ms"] = wait.count();
    log_.Warning("list and watch failed", fields);
    options_.clock->SleepFor(wait, stop);
  }
}

Status Reflector::ListAndWatch(std::stop_token stop) {
  if (auto listed = ListInto(stop); !listed.ok()) return listed;
  Backoff backoff(options_.backoff);
  while (!stop.stop_requested()) {
    const Status watched = WatchOnce(stop);
    if (stop.stop_requested()) return Ok();
    if (watched.ok()) {
      backoff.Reset();  // the server ended the stream normally: resume at once
      continue;
    }
    const Error& error = watched.error();
    if (error.code == ErrorCode::kExpired) {
      std::lock_guard lock(mutex_);
      ++stats_.expired;
    }
    // Transient failures (server restarting, connection lost, throttled, a very
    // short watch) resume the watch from the last version after a pause;
    // anything else re-lists.
    const bool transient = error.code == ErrorCode::kUnavailable ||
                           error.code == ErrorCode::kDeadlineExceeded ||
                           error.code == ErrorCode::kResourceExhausted;
    if (!transient) return watched;
    const auto wait = backoff.Next();
    log_.Info("watch interrupted; resuming", {{"resource", type_.resource},
                                              {"error", error.ToString()},
                                              {"resource_version", LastSyncResourceVersion()},
                                              {"retry_in_ms", wait.count()}});
    options_.clock->SleepFor(wait, stop);
  }
  return Ok();
}

namespace {
// The list's version is no longer served: compacted away (410), or the
// server's cache is behind it (504 "Too large resource version").
bool VersionUnavailable(const Error& error) {
  return error.code == ErrorCode::kExpired ||
         (error.code == ErrorCode::kDeadlineExceeded &&
          error.message.find("Too large resource version") != std::string::npos);
}
}  // namespace

Status Reflector::ListInto(std::stop_token stop) {
  std::string version;
  {
    std::lock_guard lock(mutex_);
    if (last_version_unavailable_) {
      version.clear();
    } else if (last_version_.empty()) {
      // "0": any version the server has (assigned this way to dodge a GCC 12
      // -Wrestrict false positive).
      if (options_.initial_list_from_cache) version.assign(1, '0');
    } else {
      version = last_version_;
    }
  }
  Status listed = ListAt(version, stop);
  if (listed.ok() || stop.stop_requested() || version.empty() ||
      !VersionUnavailable(listed.error())) {
    return listed;
  }
  // At once, as client-go: a consistent read always makes progress.
  log_.Info("list at the last synced version refused; listing the latest",
            {{"resource", type_.resource},
             {"resource_version", version},
             {"error", listed.error().ToString()}});
  {
    std::lock_guard lock(mutex_);
    last_version_unavailable_ = true;
    ++stats_.expired;
  }
  return ListAt("", stop);
}

Status Reflector::ListAt(const std::string& version, std::stop_token stop) {
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.resource_version = version;
  const bool at_version = !version.empty() && version != "0";
  if (at_version) {
    // Not older than the version this cache already has: the API server answers
    // from its watch cache. In one response: a paged read at a version would be
    // an exact read from etcd, what this is meant to spare (client-go does the same).
    options.resource_version_match = "NotOlderThan";
  } else {
    options.limit = options_.page_size;  // "0" is answered whole from the cache anyway
  }
  std::vector<CachedObject> objects;
  // Items are converted as they are decoded from the response stream, so the
  // JSON of the whole list is never held at once.
  auto add_json = [&](nlohmann::json item) { objects.push_back(Cache(std::move(item))); };
  auto add = [&](CachedObject object) { objects.push_back(std::move(object)); };
  // A transform works on JSON, so those lists are read as JSON.
  auto page = [&](const ListOptions& page_options) -> Result<ObjectList> {
    return options_.transform
               ? client_->ListPageStreaming(type_, namespace_, page_options, add_json, stop)
               : client_->ListPageCached(type_, namespace_, page_options, options_.list_encoding,
                                         add, stop);
  };
  {
    std::lock_guard lock(mutex_);
    stats_.last_list_requested_version = version;
  }
  auto listed = ListAllPages(options, page, [&] { objects.clear(); });
  if (!listed.ok()) return listed.error();
  if (stop.stop_requested()) return Ok();
  if (listed->full_list_after_expiry) {
    log_.Info("continue token expired; read the list whole",
              {{"resource", type_.resource}, {"pages", listed->pages}});
  }
  // Recorded first: whoever sees the sink synced also sees where it is synced to.
  {
    std::lock_guard lock(mutex_);
    last_version_ = listed->resource_version;
    last_version_unavailable_ = false;
  }
  const std::size_t count = objects.size();
  sink_.Replace(std::move(objects), listed->resource_version);
  std::lock_guard lock(mutex_);
  ++stats_.lists;
  if (listed->full_list_after_expiry) ++stats_.full_lists_after_expired_page;
  log_.Debug("listed", {{"resource", type_.resource},
                        {"objects", count},
                        {"resource_version", listed->resource_version},
                        {"requested_version", version}});
  return Ok();
}

Status Reflector::WatchOnce(std::stop_token stop) {
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.resource_version = LastSyncResourceVersion();
  options.allow_watch_bookmarks = options_.allow_watch_bookmarks;
  const auto timeout = std::chrono::duration_cast<std::chrono::seconds>(
      Jittered(options_.min_watch_timeout, 1.0, 2.0, random_));
  options.timeout_seconds = std::max<int>(1, static_cast<int>(timeout.count()));
  const Clock::TimePoint started = options_.clock->Now();
  int received = 0;  // events and bookmarks
  auto stream = client_->Watch(type_, namespace_, options, stop);
  if (!stream.ok()) return stream.error();
  {
    std::lock_guard lock(mutex_);
    ++stats_.watches;
  }
  WatchStream& watch = **stream;
  std::stop_callback cancel_on_stop(stop, [&watch] { watch.Cancel(); });
  while (true) {
    auto next = watch.Next();
    if (!next.ok()) {
      std::lock_guard lock(mutex_);
      if (next.error().code != ErrorCode::kExpired) ++stats_.stream_failures;
      return next.error();
    }
    if (!next->has_value()) {
      const auto lasted = options_.clock->Now() - started;
      std::lock_guard lock(mutex_);
      if (received == 0 && lasted < options_.min_watch_duration) {
        ++stats_.very_short_watches;
        return MakeError(
            ErrorCode::kUnavailable,
            "very short watch: the server ended it normally after " +
                std::to_string(
                    std::chrono::duration_cast<std::chrono::milliseconds>(lasted).count()) +
                " ms with no event");
      }
      ++stats_.stream_ends;
      return Ok();
    }
    ++received;
    WatchEvent& event = **next;
    std::string version = event.ResourceVersion();
    switch (event.type) {
      case WatchEventType::kBookmark: {
        std::lock_guard lock(mutex_);
        ++stats_.bookmarks;
        break;
      }
      case WatchEventType::kAdded:
        sink_.Added(Cache(std::move(event.object)));
        break;
      case WatchEventType::kModified:
        sink_.Modified(Cache(std::move(event.object)));
        break;
      case WatchEventType::kDeleted:
        sink_.Deleted(Cache(std::move(event.object)));
        break;
    }
    if (event.type != WatchEventType::kBookmark) {
      std::lock_guard lock(mutex_);
      ++stats_.events;
    }
    if (!version.empty()) SetLastVersion(std::move(version));
  }
}

}  // namespace fulcrum::kube
