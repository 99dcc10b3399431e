// Against the real API server: lists of built-in objects read as protobuf carry exactly what
// the same lists read as JSON carry (plus only the zero values JSON omits), and types
// without protobuf (custom resources, apiextensions) are read as JSON.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "operator/kube/protobuf/list_decoder.h"
#include "tests/operator/kube/kube_test_support.h"

namespace fulcrum::kube::testing {
namespace {

bool IsZero(const nlohmann::json& value) {
  return value.is_null() || (value.is_string() && value.get<std::string>().empty()) ||
         (value.is_number() && value == 0) || (value.is_boolean() && !value.get<bool>()) ||
         (value.is_object() && std::all_of(value.begin(), value.end(), IsZero)) ||
         (value.is_array() && value.empty());
}

// Every value in `json` is in `proto` and equal; whatever `proto` has beyond it is a zero value.
void ExpectSameObject(const nlohmann::json& json, const nlohmann::json& proto,
                      const std::string& path) {
  if (json.is_object() && proto.is_object()) {
    for (const auto& [key, value] : json.items()) {
      if (!proto.contains(key)) {
        ADD_FAILURE() << path << "." << key << " is missing from the protobuf form";
        continue;
      }
      ExpectSameObject(value, proto.at(key), path + "." + key);
    }
    for (const auto& [key, value] : proto.items()) {
      if (!json.contains(key)) {
        EXPECT_TRUE(IsZero(value)) << path << "." << key << " = " << value.dump();
      }
    }
    return;
  }
  if (json.is_array() && proto.is_array() && json.size() == proto.size()) {
    for (std::size_t i = 0; i < json.size(); ++i) {
      ExpectSameObject(json[i], proto[i], path + "[" + std::to_string(i) + "]");
    }
    return;
  }
  EXPECT_EQ(json, proto) << path;
}

struct Listed {
  std::map<std::string, nlohmann::json> objects;  // key -> JSON form
  std::string media_type;
  std::string resource_version;
};

Listed ListCached(ApiClient& client, const ResourceType& type, const std::string& ns,
                  ListEncoding encoding) {
  Listed listed;
  auto list = client.ListPageCached(type, ns, {}, encoding, [&](CachedObject object) {
    listed.objects[object.key()] = object.ToJson();
  });
  EXPECT_TRUE(list.ok()) << list.error().ToString();
  if (list.ok()) {
    listed.media_type = list->media_type;
    listed.resource_version = list->resource_version;
  }
  return listed;
}

// Objects can change between the two lists (kwok updates pods and nodes, the control plane
// writes events), so only objects at the same resourceVersion in both are compared; at least
// `at_least` distinct ones must be. On a loaded machine kwok's node heartbeats can move most
// nodes between two lists, so the pair of lists is taken again (a few times at most) until
// enough objects were caught unchanged.
void ExpectProtobufMatchesJson(ApiClient& client, const ResourceType& type, const std::string& ns,
                               std::size_t at_least) {
  constexpr int kAttempts = 10;
  std::set<std::string> compared;
  for (int attempt = 0; attempt < kAttempts && compared.size() < at_least; ++attempt) {
    const Listed json = ListCached(client, type, ns, ListEncoding::kJson);
    const Listed proto = ListCached(client, type, ns, ListEncoding::kProtobufForBuiltIns);
    EXPECT_EQ(json.media_type, "application/json");
    EXPECT_EQ(proto.media_type, protobuf::kProtobufMediaType) << type.resource;
    for (const auto& [key, object] : json.objects) {
      const auto other = proto.objects.find(key);
      if (other == proto.objects.end() ||
          ResourceVersionOf(other->second) != ResourceVersionOf(object)) {
        continue;  // created, deleted or changed in between
      }
      ExpectSameObject(object, other->second, type.resource + "/" + key);
      compared.insert(key);
    }
  }
  EXPECT_GE(compared.size(), at_least) << type.resource;
}

TEST(KubeProtobufList, BuiltInObjectsMatchTheirJsonForm) {
  auto client = AdminClient();
  const std::string ns = "protobuf-fidelity";
  CreateNamespace(*client, ns);
  const nlohmann::json pod = nlohmann::json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "trainer-0", "labels": {"app": "fulcrum"}, "annotations": {"a": "b"}},
    "spec": {
      "nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"},
      "tolerations": [{"operator": "Exists"}],
      "containers": [{
        "name": "main", "image": "fulcrum-trainer:dev", "args": ["--steps", "10"],
        "ports": [{"name": "metrics", "containerPort": 9400}],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "job-token", "key": "token"}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "envFrom": [{"configMapRef": {"name": "settings"}}],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": "1"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10},
        "readinessProbe": {"tcpSocket": {"port": 9400}},
        "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}],
      "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}]}})");
  ASSERT_TRUE(client->Create(resources::Pods(), ns, pod).ok());
  ASSERT_TRUE(client
                  ->Create(resources::ConfigMaps(), ns,
                           {{"apiVersion", "v1"},
                            {"kind", "ConfigMap"},
                            {"metadata", {{"name", "settings"}}},
                            {"data", {{"mode", "fast"}}},
                            {"binaryData", {{"blob", "AP8QaGk="}}}})
                  .ok());
  ASSERT_TRUE(client
                  ->Create(resources::Secrets(), ns,
                           {{"apiVersion", "v1"},
                            {"kind", "Secret"},
                            {"metadata", {{"name", "job-token"}}},
                            {"stringData", {{"token", "s3cret"}}}})
                  .ok());
  ASSERT_TRUE(client
                  ->Create(resources::Services(), ns,
                           {{"apiVersion", "v1"},
                            {"kind", "Service"},
                            {"metadata", {{"name", "coordinator"}}},
                            {"spec",
                             {{"selector", {{"app", "fulcrum"}}},
                              {"ports",
                               {{{"name", "grpc"}, {"port", 50051}, {"targetPort", "grpc"}},
                                {{"name", "metrics"}, {"port", 9400}, {"targetPort", 9400}}}}}}})
                  .ok());
  ASSERT_TRUE(client
                  ->Create(resources::Leases(), ns,
                           {{"apiVersion", "coordination.k8s.io/v1"},
                            {"kind", "Lease"},
                            {"metadata", {{"name", "leader"}}},
                            {"spec",
                             {{"holderIdentity", "op-1"},
                              {"leaseDurationSeconds", 15},
                              {"renewTime", "2026-11-22T05:00:00.123456Z"}}}})
                  .ok());

  // kwok runs the pod on a T4 node; wait until it has, so the pod holds still while listed.
  ASSERT_TRUE(WaitFor([&] {
    auto got = client->Get(resources::Pods(), ns, "trainer-0");
    return got.ok() &&
           got->value("status", nlohmann::json::object()).value("phase", "") == "Running";
  })) << "the pod never ran";
  for (const ResourceType& type : {resources::Pods(), resources::ConfigMaps(), resources::Secrets(),
                                   resources::Services(), resources::Leases()}) {
    SCOPED_TRACE(type.resource);
    ExpectProtobufMatchesJson(*client, type, ns, 1);
  }
  // Cluster-wide: the kwok GPU nodes (capacity quantities, conditions, addresses) and the
  // Events the control plane wrote.
  ExpectProtobufMatchesJson(*client, resources::Nodes(), "", 8);
  ExpectProtobufMatchesJson(*client, resources::Events(), "", 0);
}

TEST(KubeProtobufList, TypesWithoutProtobufAreReadAsJson) {
  auto client = AdminClient();
  const ResourceType crds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
  const Listed listed = ListCached(*client, crds, "", ListEncoding::kProtobufForBuiltIns);
  EXPECT_EQ(listed.media_type, "application/json");
  EXPECT_FALSE(listed.resource_version.empty());
}

}  // namespace
}  // namespace fulcrum::kube::testing
