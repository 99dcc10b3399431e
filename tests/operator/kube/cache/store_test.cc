// The cache store: keys, indexes kept in step with updates and deletes.
#include "operator/kube/cache/store.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace fulcrum::kube {
namespace {

CachedObject Pod(const std::string& ns, const std::string& name, const std::string& rv,
                 nlohmann::json labels = nlohmann::json::object(), const std::string& owner = "") {
  nlohmann::json pod = {{"apiVersion", "v1"},
                        {"kind", "Pod"},
                        {"metadata",
                         {{"namespace", ns},
                          {"name", name},
                          {"uid", "uid-" + name},
                          {"resourceVersion", rv},
                          {"labels", labels}}},
                        {"spec", {{"nodeName", "n1"}}}};
  if (!owner.empty()) pod["metadata"]["ownerReferences"] = {{{"uid", owner}, {"kind", "Job"}}};
  return CachedObject::FromJson(pod);
}

std::vector<std::string> Keys(const Result<std::vector<CachedObject>>& objects) {
  EXPECT_TRUE(objects.ok());
  std::vector<std::string> keys;
  for (const auto& object : *objects) keys.push_back(object.key());
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(CachedObject, KeepsIdentityAndRoundTripsTheWholeObject) {
  const CachedObject pod = Pod("ns1", "p", "7", {{"app", "x"}}, "owner-1");
  EXPECT_EQ(pod.key(), "ns1/p");
  EXPECT_EQ(pod.ns(), "ns1");
  EXPECT_EQ(pod.name(), "p");
  EXPECT_EQ(pod.uid(), "uid-p");
  EXPECT_EQ(pod.resource_version(), "7");
  EXPECT_EQ(pod.owner_uids(), std::vector<std::string>{"owner-1"});
  EXPECT_EQ(pod.ToJson()["spec"]["nodeName"], "n1");
  const CachedObject node = CachedObject::FromJson({{"metadata", {{"name", "node-1"}}}});
  EXPECT_EQ(node.key(), "node-1");
  EXPECT_EQ(node.ns(), "");
}

TEST(Store, IndexesFollowUpdatesDeletesAndReplace) {
  Store store;
  ASSERT_TRUE(store.AddIndex(indexes::kNamespace, indexes::ByNamespace()).ok());
  ASSERT_TRUE(store.AddIndex(indexes::kLabel, indexes::ByLabel()).ok());
  ASSERT_TRUE(store.AddIndex(indexes::kOwnerUid, indexes::ByOwnerUid()).ok());
  EXPECT_FALSE(store.AddIndex(indexes::kLabel, indexes::ByLabel()).ok());

  store.Upsert(Pod("a", "p1", "1", {{"app", "web"}}, "job-1"));
  store.Upsert(Pod("a", "p2", "1", {{"app", "db"}}, "job-1"));
  store.Upsert(Pod("b", "p3", "1", {{"app", "web"}}));
  EXPECT_EQ(Keys(store.ByIndex(indexes::kNamespace, "a")),
            (std::vector<std::string>{"a/p1", "a/p2"}));
  EXPECT_EQ(Keys(store.ByIndex(indexes::kLabel, "app=web")),
            (std::vector<std::string>{"a/p1", "b/p3"}));
  EXPECT_EQ(Keys(store.ByIndex(indexes::kOwnerUid, "job-1")),
            (std::vector<std::string>{"a/p1", "a/p2"}));

  const auto previous = store.Upsert(Pod("a", "p1", "2", {{"app", "db"}}));
  ASSERT_TRUE(previous.has_value());
  EXPECT_EQ(previous->resource_version(), "1");
  EXPECT_EQ(Keys(store.ByIndex(indexes::kLabel, "app=web")), (std::vector<std::string>{"b/p3"}));
  EXPECT_EQ(Keys(store.ByIndex(indexes::kOwnerUid, "job-1")), (std::vector<std::string>{"a/p2"}));

  ASSERT_TRUE(store.Remove("a/p2").has_value());
  EXPECT_FALSE(store.Remove("a/p2").has_value());
  EXPECT_EQ(Keys(store.ByIndex(indexes::kOwnerUid, "job-1")), std::vector<std::string>{});

  store.Replace({Pod("c", "p9", "5", {{"app", "web"}})});
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(Keys(store.ByIndex(indexes::kLabel, "app=web")), (std::vector<std::string>{"c/p9"}));
  EXPECT_EQ(Keys(store.ByIndex(indexes::kNamespace, "a")), std::vector<std::string>{});
  EXPECT_EQ(store.ByIndex("nope", "x").error().code, ErrorCode::kNotFound);
}

TEST(Store, AnIndexAddedLaterCoversExistingObjects) {
  Store store;
  store.Upsert(Pod("a", "p1", "1", {{"tier", "gpu"}}));
  ASSERT_TRUE(store.AddIndex(indexes::kLabel, indexes::ByLabel()).ok());
  EXPECT_EQ(Keys(store.ByIndex(indexes::kLabel, "tier=gpu")), (std::vector<std::string>{"a/p1"}));
}

}  // namespace
}  // namespace fulcrum::kube
