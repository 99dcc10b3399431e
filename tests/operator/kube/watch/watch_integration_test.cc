// Watch and informer against a real API server, through the disruptions a
// production operator meets: watch streams ending, the API server restarting,
// and 410 Gone after etcd compaction. Every change must reach the handlers
// exactly once and in order, and the cache must equal a fresh list afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>

#include "operator/kube/cache/informer.h"
#include "tests/operator/kube/kube_test_support.h"

namespace fulcrum::kube {
namespace {

using fulcrum::testing::Cluster;
using fulcrum::testing::RunShell;
using fulcrum::testing::ShellQuote;
using fulcrum::testing::SourcePath;
using testing::AdminClient;
using testing::ConfigMap;
using testing::CreateNamespace;
using testing::WaitFor;

// What the handlers saw, as "ADD name v", "UPDATE name v", "DELETE name v"
// (data.v of the object, "-" if none); a deletion learnt from a re-list, whose
// final state is unknown, as "TOMBSTONE name v".
class HandlerLog {
 public:
  ResourceEventHandler Handler() {
    return {
        .on_add = [this](const CachedObject& o) { Record("ADD", o); },
        .on_update = [this](const CachedObject&, const CachedObject& o) { Record("UPDATE", o); },
        .on_delete =
            [this](const DeletedObject& o) {
              Record(o.final_state_unknown ? "TOMBSTONE" : "DELETE", o);
            },
    };
  }
  std::vector<std::string> lines() const {
    std::lock_guard lock(mutex_);
    return lines_;
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return lines_.size();
  }

 private:
  void Record(const char* what, const CachedObject& object) {
    // The controller-manager adds this to new namespaces whenever it gets to it.
    if (object.name() == "kube-root-ca.crt") return;
    const nlohmann::json json = object.ToJson();
    const auto data = json.find("data");
    const std::string value =
        data != json.end() && data->is_object() ? data->value("v", "-") : std::string("-");
    std::lock_guard lock(mutex_);
    lines_.push_back(std::string(what) + " " + std::string(object.name()) + " " + value);
  }
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

InformerOptions FastRetryOptions(const std::string& ns) {
  InformerOptions options;
  options.ns = ns;
  options.reflector.backoff.initial = std::chrono::milliseconds(200);
  options.reflector.backoff.max = std::chrono::milliseconds(2000);
  return options;
}

void SetCounter(ApiClient& client, const std::string& ns, const std::string& name, int value) {
  auto patched = client.Patch(resources::ConfigMaps(), ns, name, PatchType::kMerge,
                              {{"data", {{"v", std::to_string(value)}}}});
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
}

// The informer's cache and a fresh list agree on every key and version. Listed afresh on every
// try: kube-controller-manager writes to the namespace too (its kube-root-ca.crt ConfigMap),
// late on a loaded machine, and a list taken once before that never matched the cache again
// (CI: "informer cache differs" for 60 s after a correct re-list).
void ExpectCacheEqualsFreshList(ApiClient& client, const Informer& informer,
                                const std::string& ns) {
  std::map<std::string, std::string> expected, cached;
  const bool equal = WaitFor([&] {
    auto listed = client.List(resources::ConfigMaps(), ns);
    if (!listed.ok()) return false;
    expected.clear();
    for (const auto& item : listed->items) expected[ObjectKey(item)] = ResourceVersionOf(item);
    cached.clear();
    for (const auto& object : informer.store().List())
      cached[object.key()] = object.resource_version();
    return cached == expected;
  });
  EXPECT_TRUE(equal) << "informer cache differs from a fresh list of " << ns << ": "
                     << nlohmann::json(cached).dump() << " against "
                     << nlohmann::json(expected).dump();
}

void Component(const std::string& action, const std::string& component) {
  const auto result = RunShell(ShellQuote(SourcePath("tests/cluster/ctl")) + " --dir " +
                               ShellQuote(Cluster().dir) + " " + action + " " + component);
  ASSERT_EQ(result.exit_code, 0) << result.output;
}

void WaitForApiServer(ApiClient& client) {
  const bool ready = WaitFor(
      [&] {
        return client.rest().Do({"GET", "/readyz", "", ""}).ok();
      },
      std::chrono::seconds(180));
  ASSERT_TRUE(ready) << "kube-apiserver did not become ready again";
}

// etcd's JSON gateway: the current revision, a write, a compaction.
nlohmann::json Etcd(const std::string& path, const nlohmann::json& body) {
  const auto result =
      RunShell("curl -fsS -X POST " + ShellQuote(Cluster().Get("FULCRUM_ETCD") + path) + " -d " +
               ShellQuote(body.dump()));
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(result.output, nullptr, false);
}

std::vector<std::string> CounterHistory(const std::string& name, int from, int to) {
  std::vector<std::string> lines;
  for (int v = from; v <= to; ++v)
    lines.push_back(std::string(v == 0 ? "ADD " : "UPDATE ") + name + " " + std::to_string(v));
  return lines;
}

TEST(KubeWatch, EveryChangeOnceInOrderAcrossStreamTimeouts) {
  auto client = AdminClient();
  CreateNamespace(*client, "watch-timeout");
  InformerOptions options = FastRetryOptions("watch-timeout");
  options.reflector.min_watch_timeout = std::chrono::seconds(1);  // streams end every 1-2s
  Informer informer(client, resources::ConfigMaps(), options);
  HandlerLog log;
  informer.AddEventHandler(log.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  const std::size_t initial = log.size();

  ASSERT_TRUE(client
                  ->Create(resources::ConfigMaps(), "watch-timeout",
                           ConfigMap("watch-timeout", "counter", {{"v", "0"}}))
                  .ok());
  constexpr int kUpdates = 8;
  for (int v = 1; v <= kUpdates; ++v) {
    // Let at least one stream end between some of the updates.
    if (v % 2 == 0) {
      const int ends = informer.reflector().stats().stream_ends;
      ASSERT_TRUE(WaitFor([&] { return informer.reflector().stats().stream_ends > ends; }));
    }
    SetCounter(*client, "watch-timeout", "counter", v);
  }
  ASSERT_TRUE(client->Delete(resources::ConfigMaps(), "watch-timeout", "counter").ok());
  ASSERT_TRUE(WaitFor([&] { return log.size() >= initial + kUpdates + 2; }));
  std::vector<std::string> expected = CounterHistory("counter", 0, kUpdates);
  expected.push_back("DELETE counter " + std::to_string(kUpdates));
  auto seen = log.lines();
  seen.erase(seen.begin(), seen.begin() + static_cast<long>(initial));
  EXPECT_EQ(seen, expected);
  const ReflectorStats stats = informer.reflector().stats();
  std::printf("stream ends: %d, watches: %d, lists: %d\n", stats.stream_ends, stats.watches,
              stats.lists);
  EXPECT_GE(stats.stream_ends, kUpdates / 2);
  EXPECT_EQ(stats.lists, 1) << "a normal stream end resumes; it must not re-list";
  ExpectCacheEqualsFreshList(*client, informer, "watch-timeout");
}

TEST(KubeWatch, BookmarksAdvanceTheResourceVersionWithoutEvents) {
  auto client = AdminClient();
  CreateNamespace(*client, "watch-bookmark");
  // kube-controller-manager publishes kube-root-ca.crt into every new
  // namespace, some time after it is made; that ADD would be a real event.
  ASSERT_TRUE(WaitFor([&] {
    return client->Get(resources::ConfigMaps(), "watch-bookmark", "kube-root-ca.crt").ok();
  })) << "kube-root-ca.crt never appeared in watch-bookmark";
  InformerOptions options = FastRetryOptions("watch-bookmark");
  options.reflector.min_watch_timeout = std::chrono::seconds(4);
  Informer informer(client, resources::ConfigMaps(), options);
  HandlerLog log;
  informer.AddEventHandler(log.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  const std::string synced_at = informer.reflector().LastSyncResourceVersion();
  const std::size_t initial = log.size();

  // Writes elsewhere move the server's resourceVersion; bookmarks carry it here.
  CreateNamespace(*client, "watch-bookmark-elsewhere");
  int written = 0;
  const bool bookmarked = WaitFor([&] {
    (void)client->Create(
        resources::ConfigMaps(), "watch-bookmark-elsewhere",
        ConfigMap("watch-bookmark-elsewhere", "noise-" + std::to_string(written++)));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return informer.reflector().stats().bookmarks > 0 &&
           informer.reflector().LastSyncResourceVersion() != synced_at;
  });
  ASSERT_TRUE(bookmarked) << "no bookmark moved the resourceVersion";
  EXPECT_EQ(log.size(), initial) << "bookmarks must not reach the handlers";
  EXPECT_EQ(informer.reflector().stats().events, 0);
  std::printf("bookmarks: %d, resourceVersion %s -> %s\n", informer.reflector().stats().bookmarks,
              synced_at.c_str(), informer.reflector().LastSyncResourceVersion().c_str());
}

// Restart the API server; with `compact`, also write to etcd and compact it
// while the server is down, so that resuming from the last version must fail
// with 410 and the informer must re-list.
void RunRestartScenario(const std::string& ns, bool compact) {
  auto client = AdminClient();
  CreateNamespace(*client, ns);
  Informer informer(client, resources::ConfigMaps(), FastRetryOptions(ns));
  HandlerLog log;
  informer.AddEventHandler(log.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  const std::size_t initial = log.size();

  ASSERT_TRUE(
      client->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "counter", {{"v", "0"}})).ok());
  ASSERT_TRUE(
      client->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "doomed", {{"v", "0"}})).ok());
  if (compact) {
    ASSERT_TRUE(
        client->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "vanished", {{"v", "0"}})).ok());
  }
  for (int v = 1; v <= 3; ++v) SetCounter(*client, ns, "counter", v);
  ASSERT_TRUE(WaitFor([&] { return log.size() >= initial + (compact ? 6 : 5); }));
  const std::string before_restart = informer.reflector().LastSyncResourceVersion();

  ASSERT_NO_FATAL_FAILURE(Component("stop", "kube-apiserver"));
  if (compact) {
    // Deleted behind the API server's back, so that no watch can report it: the
    // informer learns it only from its re-list, and must say so (a tombstone).
    const std::string key = "/registry/configmaps/" + ns + "/vanished";
    const nlohmann::json deleted =
        Etcd("/v3/kv/deleterange",
             {{"key", RunShell("printf %s " + ShellQuote(key) + " | base64 -w0").output}});
    ASSERT_EQ(deleted.value("deleted", "0"), "1") << deleted.dump();
    // base64("/fulcrum-test/junk"): a write outside Kubernetes' keys moves the revision.
    Etcd("/v3/kv/put", {{"key", "L2Z1bGNydW0tdGVzdC9qdW5r"}, {"value", "eA=="}});
    const nlohmann::json range = Etcd("/v3/kv/range", {{"key", "Zm9v"}});
    const std::string revision = range["header"]["revision"].get<std::string>();
    Etcd("/v3/kv/compaction", {{"revision", revision}, {"physical", true}});
    std::printf("compacted etcd at revision %s\n", revision.c_str());
  }
  ASSERT_NO_FATAL_FAILURE(Component("start", "kube-apiserver"));
  ASSERT_NO_FATAL_FAILURE(WaitForApiServer(*client));
  if (compact) {
    // A watch from before the compaction is refused with 410 Gone (in-stream or HTTP).
    ListOptions stale;
    stale.resource_version = before_restart;
    stale.timeout_seconds = 5;
    auto watch = client->Watch(resources::ConfigMaps(), ns, stale);
    Result<std::optional<WatchEvent>> first = std::optional<WatchEvent>();
    if (watch.ok()) first = (*watch)->Next();
    const Error error = !watch.ok() ? watch.error() : first.ok() ? Error{} : first.error();
    EXPECT_EQ(error.code, ErrorCode::kExpired) << error.ToString();
    std::printf("watch from %s after compaction: %s\n", before_restart.c_str(),
                error.ToString().c_str());
    // The informer re-lists (and reports the tombstone) before the writes below,
    // so that the order of what it reports is known.
    ASSERT_TRUE(WaitFor([&] { return informer.reflector().stats().lists >= 2; },
                        std::chrono::seconds(120)));
  }

  for (int v = 4; v <= 6; ++v) SetCounter(*client, ns, "counter", v);
  ASSERT_TRUE(client->Delete(resources::ConfigMaps(), ns, "doomed").ok());
  ASSERT_TRUE(
      client->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "late", {{"v", "0"}})).ok());
  std::vector<std::string> expected = {"ADD counter 0", "ADD doomed 0"};
  if (compact) expected.push_back("ADD vanished 0");
  for (const char* line : {"UPDATE counter 1", "UPDATE counter 2", "UPDATE counter 3"})
    expected.push_back(line);
  if (compact) expected.push_back("TOMBSTONE vanished 0");
  for (const char* line : {"UPDATE counter 4", "UPDATE counter 5", "UPDATE counter 6",
                           "DELETE doomed 0", "ADD late 0"})
    expected.push_back(line);
  // A last write as a barrier: handlers are called in the order of changes, so
  // once its ADD is in, every notification before it is in too, and a late
  // duplicate of any of them would sit between the expected ones and this.
  ASSERT_TRUE(
      client->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "barrier", {{"v", "0"}})).ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto lines = log.lines();
        return std::find(lines.begin(), lines.end(), "ADD barrier 0") != lines.end();
      },
      std::chrono::seconds(120)));
  expected.push_back("ADD barrier 0");

  auto seen = log.lines();
  seen.erase(seen.begin(), seen.begin() + static_cast<long>(initial));
  EXPECT_EQ(seen, expected);
  const ReflectorStats stats = informer.reflector().stats();
  std::printf("lists: %d, watches: %d, expired (410): %d, stream failures: %d\n", stats.lists,
              stats.watches, stats.expired, stats.stream_failures);
  EXPECT_GE(stats.stream_failures + stats.expired, 1) << "the restart went unnoticed";
  if (compact) {
    EXPECT_GE(stats.expired, 1) << "resuming from a compacted version must get 410";
    EXPECT_GE(stats.lists, 2) << "a 410 must be followed by a re-list";
  }
  ExpectCacheEqualsFreshList(*client, informer, ns);
}

TEST(KubeWatch, EveryChangeOnceInOrderAcrossApiServerRestart) {
  RunRestartScenario("watch-restart", /*compact=*/false);
}

TEST(KubeWatch, EveryChangeOnceInOrderAcrossForced410FromEtcdCompaction) {
  RunRestartScenario("watch-gone", /*compact=*/true);
}

// After an error other than 410 (here: the informer's user loses its right to
// watch, then gets it back), the re-list asks for the version the cache is
// already synced to, not older than it, which the API server answers from its
// watch cache, instead of a consistent read from etcd (resourceVersion "").
TEST(KubeWatch, ReListAfterAnErrorAsksForTheLastSyncedVersion) {
  const std::string ns = "watch-relist-error";
  auto admin = AdminClient();
  CreateNamespace(*admin, ns);
  const nlohmann::json role = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "Role"},
      {"metadata", {{"name", "read-configmaps"}, {"namespace", ns}}},
      {"rules",
       {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"list", "watch"}}}}}};
  const nlohmann::json binding = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", {{"name", "nobody-reads"}, {"namespace", ns}}},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "read-configmaps"}}},
      {"subjects",
       {{{"apiGroup", "rbac.authorization.k8s.io"},
         {"kind", "User"},
         {"name", "fulcrum-nobody"}}}}};
  const ResourceType roles{"rbac.authorization.k8s.io", "v1", "roles", true};
  const ResourceType bindings{"rbac.authorization.k8s.io", "v1", "rolebindings", true};
  ASSERT_TRUE(admin->Create(roles, ns, role).ok());
  ASSERT_TRUE(admin->Create(bindings, ns, binding).ok());
  ASSERT_TRUE(admin->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "before")).ok());

  auto nobody = testing::ClientFor(Cluster().Get("FULCRUM_NOBODY_KUBECONFIG"));
  ASSERT_NE(nobody, nullptr);
  ASSERT_TRUE(WaitFor([&] { return nobody->List(resources::ConfigMaps(), ns).ok(); }));
  InformerOptions options = FastRetryOptions(ns);
  options.reflector.min_watch_timeout = std::chrono::seconds(1);  // watches reopen often
  Informer informer(nobody, resources::ConfigMaps(), options);
  HandlerLog log;
  informer.AddEventHandler(log.Handler());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  EXPECT_EQ(informer.reflector().stats().last_list_requested_version, "0") << "the first list";

  // The right to watch goes: the next watch is refused (403), and so is every
  // list, until it comes back.
  ASSERT_TRUE(admin->Delete(bindings, ns, "nobody-reads").ok());
  ASSERT_TRUE(WaitFor([&] { return informer.reflector().stats().failures >= 2; }))
      << "the informer never failed without its rights";
  const std::string synced = informer.reflector().LastSyncResourceVersion();
  ASSERT_FALSE(synced.empty());
  ASSERT_TRUE(admin->Create(resources::ConfigMaps(), ns, ConfigMap(ns, "while-denied")).ok());
  ASSERT_TRUE(admin->Create(bindings, ns, binding).ok());
  ASSERT_TRUE(WaitFor([&] { return informer.reflector().stats().lists >= 2; }));

  const ReflectorStats stats = informer.reflector().stats();
  std::printf("failures: %d, lists: %d, re-list asked for %s (synced to %s)\n", stats.failures,
              stats.lists, stats.last_list_requested_version.c_str(), synced.c_str());
  EXPECT_EQ(stats.last_list_requested_version, synced)
      << "the re-list must start from the last synced version, not read etcd afresh";
  EXPECT_EQ(stats.expired, 0);
  // The re-list still brings what changed while the informer could not see.
  ASSERT_TRUE(WaitFor([&] {
    const auto lines = log.lines();
    return std::find(lines.begin(), lines.end(), "ADD while-denied -") != lines.end();
  }));
  ExpectCacheEqualsFreshList(*admin, informer, ns);
}

TEST(KubeInformer, IndexesAndLateHandlersSeeTheCache) {
  auto client = AdminClient();
  CreateNamespace(*client, "informer-index");
  auto owner = client->Create(resources::ConfigMaps(), "informer-index",
                              ConfigMap("informer-index", "owner"));
  ASSERT_TRUE(owner.ok());
  nlohmann::json owned = ConfigMap("informer-index", "owned", {}, {{"tier", "gpu"}});
  owned["metadata"]["ownerReferences"] = {
      {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", "owner"}, {"uid", UidOf(*owner)}}};
  ASSERT_TRUE(client->Create(resources::ConfigMaps(), "informer-index", owned).ok());

  Informer informer(client, resources::ConfigMaps(), FastRetryOptions(""));  // all namespaces
  ASSERT_TRUE(informer.AddIndex(indexes::kOwnerUid, indexes::ByOwnerUid()).ok());
  ASSERT_TRUE(informer.AddIndex(indexes::kLabel, indexes::ByLabel()).ok());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  EXPECT_TRUE(informer.HasSynced());

  auto in_namespace = informer.store().ByIndex(indexes::kNamespace, "informer-index");
  ASSERT_TRUE(in_namespace.ok());
  EXPECT_GE(in_namespace->size(), 2u);  // owner, owned (and kube-root-ca.crt once made)
  auto by_owner = informer.store().ByIndex(indexes::kOwnerUid, UidOf(*owner));
  ASSERT_TRUE(by_owner.ok());
  ASSERT_EQ(by_owner->size(), 1u);
  EXPECT_EQ((*by_owner)[0].name(), "owned");
  EXPECT_EQ(informer.store().ByIndex(indexes::kLabel, "tier=gpu")->size(), 1u);

  std::size_t late_adds = 0;
  ResourceEventHandler late;
  late.on_add = [&](const CachedObject&) { ++late_adds; };
  informer.AddEventHandler(late);
  EXPECT_EQ(late_adds, informer.store().size()) << "a late handler first sees the cache as adds";
}

TEST(KubeInformer, PeriodicResyncRedeliversCachedObjects) {
  auto client = AdminClient();
  CreateNamespace(*client, "informer-resync");
  ASSERT_TRUE(client
                  ->Create(resources::ConfigMaps(), "informer-resync",
                           ConfigMap("informer-resync", "steady"))
                  .ok());
  InformerOptions options = FastRetryOptions("informer-resync");
  options.resync_period = std::chrono::milliseconds(500);
  Informer informer(client, resources::ConfigMaps(), options);
  std::atomic<int> resyncs{0};
  ResourceEventHandler counter;
  counter.on_update = [&](const CachedObject& old_object, const CachedObject& now) {
    if (old_object.resource_version() == now.resource_version()) ++resyncs;
  };
  informer.AddEventHandler(counter);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  EXPECT_TRUE(WaitFor([&] { return resyncs.load() >= 2; }));
}

}  // namespace
}  // namespace fulcrum::kube
