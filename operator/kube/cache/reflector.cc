#include "operator/kube/cache/reflector.h"

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

void Reflector::SetLastVersion(std::string version) {
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
    // Transient failures (server restarting, connection lost, throttled) resume
    // the watch from the last version after a pause; anything else re-lists.
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

Status Reflector::ListInto(std::stop_token stop) {
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.limit = options_.page_size;
  const bool from_cache = options_.initial_list_from_cache && LastSyncResourceVersion().empty();
  // "0": any version the server has (written this way to dodge a GCC 12 -Wrestrict false positive).
  if (from_cache) options.resource_version.assign(1, '0');
  std::vector<CachedObject> objects;
  std::string version;
  // Items are converted as they are decoded from the response stream, so the
  // JSON of the whole list is never held at once.
  auto add_json = [&](nlohmann::json item) { objects.push_back(Cache(std::move(item))); };
  auto add = [&](CachedObject object) { objects.push_back(std::move(object)); };
  do {
    if (stop.stop_requested()) return Ok();
    // A transform works on JSON, so those lists are read as JSON.
    auto page = options_.transform
                    ? client_->ListPageStreaming(type_, namespace_, options, add_json)
                    : client_->ListPageCached(type_, namespace_, options, options_.list_encoding, add);
    if (!page.ok()) return page.error();
    if (version.empty()) version = page->resource_version;
    options.continue_token = page->continue_token;
    options.resource_version.clear();  // a continued list keeps its first page's snapshot
  } while (!options.continue_token.empty());
  // Recorded first: whoever sees the sink synced also sees where it is synced to.
  SetLastVersion(version);
  const std::size_t count = objects.size();
  sink_.Replace(std::move(objects), version);
  std::lock_guard lock(mutex_);
  ++stats_.lists;
  log_.Debug("listed", {{"resource", type_.resource},
                        {"objects", count},
                        {"resource_version", version},
                        {"from_cache", from_cache}});
  return Ok();
}

Status Reflector::WatchOnce(std::stop_token stop) {
  ListOptions options;
  options.label_selector = options_.label_selector;
  options.field_selector = options_.field_selector;
  options.resource_version = LastSyncResourceVersion();
  options.allow_watch_bookmarks = options_.allow_watch_bookmarks;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  options.timeout_seconds =
      std::max<int>(1, static_cast<int>(static_cast<double>(options_.min_watch_timeout.count()) *
                                        (1.0 + unit(random_))));
  auto stream = client_->Watch(type_, namespace_, options);
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
      std::lock_guard lock(mutex_);
      ++stats_.stream_ends;
      return Ok();
    }
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
