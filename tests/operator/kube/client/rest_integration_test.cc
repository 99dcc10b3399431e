// The API verbs against a real API server: CRUD on core objects and a custom
// resource, status subresource, patches and server-side apply, typed errors,
// pagination and selectors, client-side rate limit and timeouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "tests/operator/kube/kube_test_support.h"

namespace fulcrum::kube {
namespace {

using testing::AdminClient;
using testing::ConfigMap;
using testing::CreateNamespace;
using testing::WaitFor;

const ResourceType kWidgets{"kubetest.fulcrum.dev", "v1", "widgets", true};

// A small CRD with a schema (for Invalid) and a status subresource.
void EnsureWidgetCrd(ApiClient& client) {
  const ResourceType crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
  const nlohmann::json crd = nlohmann::json::parse(R"json({
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.kubetest.fulcrum.dev"},
    "spec": {
      "group": "kubetest.fulcrum.dev", "scope": "Namespaced",
      "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
      "versions": [{
        "name": "v1", "served": true, "storage": true,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
          "spec": {"type": "object", "properties": {
            "size": {"type": "integer", "minimum": 1},
            "color": {"type": "string"}}},
          "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}}}
      }]
    }})json");
  auto applied = client.Apply(crds, "", crd, "kube-rest-test", /*force=*/true);
  ASSERT_TRUE(applied.ok()) << applied.error().ToString();
  const bool established = WaitFor([&] {
    auto got = client.Get(crds, "", "widgets.kubetest.fulcrum.dev");
    if (!got.ok()) return false;
    for (const auto& condition : (*got)["status"].value("conditions", nlohmann::json::array())) {
      if (condition.value("type", "") == "Established" && condition.value("status", "") == "True") {
        // Established can precede discovery by a moment; a list proves it is served.
        return client.ListPage(kWidgets, "default", {}).ok();
      }
    }
    return false;
  });
  ASSERT_TRUE(established) << "the Widget CRD did not become Established";
}

TEST(KubeRest, CrudOnConfigMapsWithTypedErrors) {
  auto client = AdminClient();
  CreateNamespace(*client, "rest-crud");
  const auto cms = resources::ConfigMaps();

  auto created = client->Create(cms, "rest-crud", ConfigMap("rest-crud", "one", {{"k", "v1"}}));
  ASSERT_TRUE(created.ok()) << created.error().ToString();
  EXPECT_FALSE(ResourceVersionOf(*created).empty());

  auto again = client->Create(cms, "rest-crud", ConfigMap("rest-crud", "one"));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kAlreadyExists) << again.error().ToString();

  auto got = client->Get(cms, "rest-crud", "one");
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  EXPECT_EQ((*got)["data"]["k"], "v1");

  nlohmann::json changed = *got;
  changed["data"]["k"] = "v2";
  auto updated = client->Update(cms, "rest-crud", changed);
  ASSERT_TRUE(updated.ok()) << updated.error().ToString();
  EXPECT_EQ((*updated)["data"]["k"], "v2");

  // `changed` still carries the old resourceVersion: optimistic concurrency says no.
  changed["data"]["k"] = "v3";
  auto stale = client->Update(cms, "rest-crud", changed);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.error().code, ErrorCode::kConflict) << stale.error().ToString();

  auto merged = client->Patch(cms, "rest-crud", "one", PatchType::kMerge, {{"data", {{"m", "x"}}}});
  ASSERT_TRUE(merged.ok()) << merged.error().ToString();
  EXPECT_EQ((*merged)["data"], (nlohmann::json{{"k", "v2"}, {"m", "x"}}));

  auto json_patched =
      client->Patch(cms, "rest-crud", "one", PatchType::kJson,
                    nlohmann::json::array({{{"op", "remove"}, {"path", "/data/m"}}}));
  ASSERT_TRUE(json_patched.ok()) << json_patched.error().ToString();
  EXPECT_FALSE((*json_patched)["data"].contains("m"));

  auto strategic = client->Patch(cms, "rest-crud", "one", PatchType::kStrategicMerge,
                                 {{"metadata", {{"labels", {{"s", "y"}}}}}});
  ASSERT_TRUE(strategic.ok()) << strategic.error().ToString();
  EXPECT_EQ((*strategic)["metadata"]["labels"]["s"], "y");

  // Preconditions: a delete aimed at another uid is refused.
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  const Status refused = client->Delete(cms, "rest-crud", "one", wrong_uid);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict) << refused.error().ToString();

  DeleteOptions right_uid;
  right_uid.precondition_uid = UidOf(*created);
  right_uid.propagation = PropagationPolicy::kBackground;
  const Status deleted = client->Delete(cms, "rest-crud", "one", right_uid);
  ASSERT_TRUE(deleted.ok()) << deleted.error().ToString();
  auto gone = client->Get(cms, "rest-crud", "one");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound) << gone.error().ToString();
  const Status twice = client->Delete(cms, "rest-crud", "one");
  EXPECT_EQ(twice.error().code, ErrorCode::kNotFound);
}

TEST(KubeRest, CreateSubresourcePostsATokenRequestAndReturnsTheServersAnswer) {
  auto client = AdminClient();
  const nlohmann::json request = {
      {"apiVersion", "authentication.k8s.io/v1"},
      {"kind", "TokenRequest"},
      {"spec", {{"audiences", {"fulcrum-test"}}, {"expirationSeconds", 600}}}};
  ASSERT_TRUE(WaitFor(
      [&] { return client->Get(resources::ServiceAccounts(), "default", "default").ok(); }));
  auto answer = client->CreateSubresource(resources::ServiceAccounts(), "default", "default",
                                          "token", request);
  ASSERT_TRUE(answer.ok()) << answer.error().ToString();
  EXPECT_FALSE((*answer)["status"].value("token", "").empty()) << answer->dump();
  auto missing = client->CreateSubresource(resources::ServiceAccounts(), "default", "nobody-here",
                                           "token", request);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(KubeRest, InvalidObjectNamesTheField) {
  auto client = AdminClient();
  auto invalid =
      client->Create(resources::ConfigMaps(), "default", ConfigMap("default", "Not_A_DNS_Name"));
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().code, ErrorCode::kInvalidArgument) << invalid.error().ToString();
  EXPECT_EQ(invalid.error().field, "metadata.name") << invalid.error().ToString();
}

TEST(KubeRest, ServerSideApplyTracksFieldManagersAndReportsConflicts) {
  auto client = AdminClient();
  CreateNamespace(*client, "rest-ssa");
  const auto cms = resources::ConfigMaps();
  const nlohmann::json desired = {{"apiVersion", "v1"},
                                  {"kind", "ConfigMap"},
                                  {"metadata", {{"name", "applied"}, {"namespace", "rest-ssa"}}},
                                  {"data", {{"owner", "alpha"}}}};
  auto first = client->Apply(cms, "rest-ssa", desired, "alpha");
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  std::set<std::string> managers;
  for (const auto& entry : (*first)["metadata"]["managedFields"])
    managers.insert(entry.value("manager", ""));
  EXPECT_TRUE(managers.contains("alpha"));

  // Applying is idempotent.
  auto repeat = client->Apply(cms, "rest-ssa", desired, "alpha");
  ASSERT_TRUE(repeat.ok()) << repeat.error().ToString();
  EXPECT_EQ(ResourceVersionOf(*repeat), ResourceVersionOf(*first));

  nlohmann::json rival = desired;
  rival["data"]["owner"] = "beta";
  auto conflict = client->Apply(cms, "rest-ssa", rival, "beta");
  ASSERT_FALSE(conflict.ok());
  EXPECT_EQ(conflict.error().code, ErrorCode::kConflict) << conflict.error().ToString();

  auto forced = client->Apply(cms, "rest-ssa", rival, "beta", /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.error().ToString();
  EXPECT_EQ((*forced)["data"]["owner"], "beta");

  auto no_manager = client->Patch(cms, "rest-ssa", "applied", PatchType::kApply, desired);
  EXPECT_EQ(no_manager.error().code, ErrorCode::kInvalidArgument);
}

TEST(KubeRest, CustomResourceCrudStatusSubresourceAndSchemaValidation) {
  auto client = AdminClient();
  ASSERT_NO_FATAL_FAILURE(EnsureWidgetCrd(*client));
  CreateNamespace(*client, "rest-cr");

  const nlohmann::json widget = {{"apiVersion", "kubetest.fulcrum.dev/v1"},
                                 {"kind", "Widget"},
                                 {"metadata", {{"name", "w1"}, {"namespace", "rest-cr"}}},
                                 {"spec", {{"size", 3}, {"color", "red"}}}};
  auto created = client->Create(kWidgets, "rest-cr", widget);
  ASSERT_TRUE(created.ok()) << created.error().ToString();

  // The main resource ignores status; the status subresource ignores spec.
  nlohmann::json with_status = *created;
  with_status["status"] = {{"phase", "Ready"}};
  with_status["spec"]["size"] = 99;
  auto status_updated = client->UpdateStatus(kWidgets, "rest-cr", with_status);
  ASSERT_TRUE(status_updated.ok()) << status_updated.error().ToString();
  EXPECT_EQ((*status_updated)["status"]["phase"], "Ready");
  EXPECT_EQ((*status_updated)["spec"]["size"], 3);

  auto status = client->Get(kWidgets, "rest-cr", "w1", "status");
  ASSERT_TRUE(status.ok()) << status.error().ToString();
  EXPECT_EQ((*status)["status"]["phase"], "Ready");

  // Status through server-side apply on the subresource, as a controller would.
  const nlohmann::json status_apply = {{"apiVersion", "kubetest.fulcrum.dev/v1"},
                                       {"kind", "Widget"},
                                       {"metadata", {{"name", "w1"}, {"namespace", "rest-cr"}}},
                                       {"status", {{"phase", "Done"}}}};
  auto applied =
      client->Apply(kWidgets, "rest-cr", status_apply, "widget-controller", true, "status");
  ASSERT_TRUE(applied.ok()) << applied.error().ToString();
  EXPECT_EQ((*applied)["status"]["phase"], "Done");

  auto patched =
      client->Patch(kWidgets, "rest-cr", "w1", PatchType::kMerge, {{"spec", {{"color", "blue"}}}});
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
  EXPECT_EQ((*patched)["spec"]["color"], "blue");
  EXPECT_EQ((*patched)["status"]["phase"], "Done");

  nlohmann::json bad = widget;
  bad["metadata"]["name"] = "w-bad";
  bad["spec"]["size"] = 0;
  auto invalid = client->Create(kWidgets, "rest-cr", bad);
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.error().code, ErrorCode::kInvalidArgument) << invalid.error().ToString();
  EXPECT_EQ(invalid.error().field, "spec.size") << invalid.error().ToString();

  auto listed = client->List(kWidgets, "rest-cr");
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  EXPECT_EQ(listed->items.size(), 1u);
  ASSERT_TRUE(client->Delete(kWidgets, "rest-cr", "w1").ok());
  EXPECT_EQ(client->Get(kWidgets, "rest-cr", "w1").error().code, ErrorCode::kNotFound);
}

TEST(KubeRest, ListPaginatesAndFiltersBySelectors) {
  auto client = AdminClient();
  CreateNamespace(*client, "rest-list");
  const auto cms = resources::ConfigMaps();
  for (int i = 0; i < 7; ++i) {
    auto created = client->Create(cms, "rest-list",
                                  ConfigMap("rest-list", "cm-" + std::to_string(i), {},
                                            {{"parity", i % 2 == 0 ? "even" : "odd"}}));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
  }
  ListOptions paged;
  paged.label_selector = "parity";  // existence; excludes kube-root-ca.crt
  paged.limit = 3;
  auto first = client->ListPage(cms, "rest-list", paged);
  ASSERT_TRUE(first.ok()) << first.error().ToString();
  EXPECT_EQ(first->items.size(), 3u);
  EXPECT_FALSE(first->continue_token.empty());

  auto all = client->List(cms, "rest-list", paged);
  ASSERT_TRUE(all.ok()) << all.error().ToString();
  std::set<std::string> names;
  for (const auto& item : all->items) names.insert(NameOf(item));
  EXPECT_EQ(names.size(), 7u) << "every object exactly once across pages";
  EXPECT_FALSE(all->resource_version.empty());

  ListOptions odd;
  odd.label_selector = "parity=odd";
  EXPECT_EQ(client->List(cms, "rest-list", odd)->items.size(), 3u);

  ListOptions by_name;
  by_name.field_selector = "metadata.name=cm-4";
  auto one = client->List(cms, "rest-list", by_name);
  ASSERT_TRUE(one.ok()) << one.error().ToString();
  ASSERT_EQ(one->items.size(), 1u);
  EXPECT_EQ(NameOf(one->items[0]), "cm-4");

  ListOptions bad_selector;
  bad_selector.field_selector = "spec.nonsense=1";
  EXPECT_EQ(client->List(cms, "rest-list", bad_selector).error().code, ErrorCode::kInvalidArgument);
}

TEST(KubeRest, ClientSideRateLimitSpacesRequests) {
  RestOptions options;
  options.qps = 5;
  options.burst = 1;
  auto client = testing::ClientFor(fulcrum::testing::Cluster().kubeconfig(), options);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 11; ++i)
    ASSERT_TRUE(client->Get(resources::Namespaces(), "", "default").ok());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("11 requests at qps=5 burst=1 took %.2fs\n", seconds);
  // A lower bound only: the limiter cannot make requests faster, a slow machine only slower.
  EXPECT_GE(seconds, 1.9);
}

TEST(KubeRest, RequestTimeoutIsDeadlineExceeded) {
  RestOptions options;
  options.request_timeout = std::chrono::milliseconds(1500);
  auto client = testing::ClientFor(fulcrum::testing::Cluster().kubeconfig(), options);
  // A watch held open by the server for 20s, read as an ordinary request.
  auto held = client->rest().Do(
      {"GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=20", "", ""});
  ASSERT_FALSE(held.ok());
  EXPECT_EQ(held.error().code, ErrorCode::kDeadlineExceeded) << held.error().ToString();
}

TEST(KubeRest, UnauthorizedAndForbiddenAreTyped) {
  auto nobody = testing::ClientFor(fulcrum::testing::Cluster().Get("FULCRUM_NOBODY_KUBECONFIG"));
  auto forbidden = nobody->List(resources::Pods(), "default");
  ASSERT_FALSE(forbidden.ok());
  EXPECT_EQ(forbidden.error().code, ErrorCode::kPermissionDenied) << forbidden.error().ToString();

  auto config = LoadKubeconfig(fulcrum::testing::Cluster().Get("FULCRUM_TOKEN_KUBECONFIG"));
  ASSERT_TRUE(config.ok());
  config->bearer_token = "not-a-valid-token";
  auto rest = RestClient::Create(*config);
  ASSERT_TRUE(rest.ok());
  auto unauthorized = (*rest)->Get("/api/v1/namespaces");
  ASSERT_FALSE(unauthorized.ok());
  EXPECT_EQ(unauthorized.error().code, ErrorCode::kUnauthenticated)
      << unauthorized.error().ToString();
}

}  // namespace
}  // namespace fulcrum::kube
