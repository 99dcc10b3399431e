// Proves the local control plane is real: TLS + auth from the kubeconfig, fake
// GPU nodes labelled as GPU Feature Discovery does, CRDs served, the scheduler
// binding GPU pods, kwok running them, and the garbage collector at work.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "operator/kube/config/kubeconfig.h"
#include "operator/kube/rest/rest_client.h"
#include "tests/support/test_cluster.h"

namespace fulcrum {
namespace {

using testing::Cluster;
using testing::ShellQuote;
using testing::SourcePath;

std::unique_ptr<kube::RestClient> ClientFor(const std::string& kubeconfig) {
  auto config = kube::LoadKubeconfig(kubeconfig);
  EXPECT_TRUE(config.ok()) << config.error().ToString();
  auto client = kube::RestClient::Create(*config);
  EXPECT_TRUE(client.ok()) << client.error().ToString();
  return std::move(client).value();
}

TEST(ClusterSmoke, ListsFakeGpuNodesWithGpuFeatureDiscoveryLabels) {
  auto client = ClientFor(Cluster().kubeconfig());
  auto nodes = client->Get("/api/v1/nodes?labelSelector=nvidia.com%2Fgpu.present%3Dtrue");
  ASSERT_TRUE(nodes.ok()) << nodes.error().ToString();

  std::map<std::string, int> nodes_per_product;
  for (const auto& node : (*nodes)["items"]) {
    const auto& labels = node["metadata"]["labels"];
    const std::string product = labels.value("nvidia.com/gpu.product", "");
    ++nodes_per_product[product];
    EXPECT_FALSE(labels.value("nvidia.com/gpu.memory", "").empty()) << node["metadata"]["name"];
    EXPECT_EQ(labels.value("nvidia.com/gpu.count", ""),
              node["status"]["allocatable"].value("nvidia.com/gpu", "missing"))
        << "allocatable nvidia.com/gpu must match the gpu.count label on "
        << node["metadata"]["name"];
  }
  EXPECT_EQ(nodes_per_product, (std::map<std::string, int>{
                                   {"A100-SXM4-40GB", 2}, {"V100-SXM2-16GB", 2}, {"Tesla-T4", 4}}));
}

TEST(ClusterSmoke, TokenKubeconfigAuthenticatesAndRbacForbidsAnUnprivilegedUser) {
  auto admin = ClientFor(Cluster().Get("FULCRUM_TOKEN_KUBECONFIG"));
  EXPECT_TRUE(admin->Get("/api/v1/namespaces/default").ok());

  auto nobody = ClientFor(Cluster().Get("FULCRUM_NOBODY_KUBECONFIG"));
  auto denied = nobody->Get("/api/v1/nodes");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied) << denied.error().ToString();
}

TEST(ClusterSmoke, HeteroTrainingJobCrdBecomesEstablishedAndValidatesSpecs) {
  const auto applied = Cluster().Kubectl(
      "apply -f " + ShellQuote(SourcePath("crds/fulcrum.dev_heterotrainingjobs.yaml")));
  ASSERT_EQ(applied.exit_code, 0) << applied.output;
  const auto established =
      Cluster().WaitForCondition("crd/heterotrainingjobs.fulcrum.dev", "Established");
  ASSERT_EQ(established.exit_code, 0) << established.output;
  const auto listed = Cluster().Kubectl(
      "get crd heterotrainingjobs.fulcrum.dev -o "
      "jsonpath='{.status.conditions[?(@.type==\"Established\")].status}'");
  EXPECT_EQ(listed.output, "True");

  const auto example =
      Cluster().Kubectl("apply -f " + ShellQuote(SourcePath("docs/examples/mnist-like-mlp.yaml")));
  EXPECT_EQ(example.exit_code, 0) << example.output;
  const auto by_short_name = Cluster().Kubectl("get htj mlp-demo -o name");
  EXPECT_EQ(by_short_name.output, "heterotrainingjob.fulcrum.dev/mlp-demo\n");

  // The API server itself rejects a bad spec and names the field.
  const auto rejected = Cluster().Kubectl(R"(apply -f - <<'YAML'
apiVersion: fulcrum.dev/v1alpha1
kind: HeteroTrainingJob
metadata: {name: bad-replicas}
spec:
  globalBatchSize: 64
  replicas: {min: 4, max: 2}
  training: {steps: 10}
YAML)");
  EXPECT_NE(rejected.exit_code, 0);
  EXPECT_NE(rejected.output.find("replicas.min must not exceed replicas.max"), std::string::npos)
      << rejected.output;
}

TEST(ClusterSmoke, SchedulerBindsGpuPodToT4NodeAndKwokRunsIt) {
  const auto created = Cluster().Kubectl(R"(apply -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: wants-a-t4}
spec:
  nodeSelector: {nvidia.com/gpu.product: Tesla-T4}
  containers:
    - name: main
      image: fulcrum-trainer:dev
      resources:
        limits: {nvidia.com/gpu: 1}
YAML)");
  ASSERT_EQ(created.exit_code, 0) << created.output;
  const auto running = Cluster().Kubectl(
      "wait --for=jsonpath='{.status.phase}'=Running --timeout=90s pod/wants-a-t4");
  ASSERT_EQ(running.exit_code, 0) << running.output
                                  << Cluster().Kubectl("describe pod wants-a-t4").output;
  const auto node = Cluster().Kubectl("get pod wants-a-t4 -o jsonpath='{.spec.nodeName}'");
  const auto product = Cluster().Kubectl(
      "get node " + node.output + " -o jsonpath='{.metadata.labels.nvidia\\.com/gpu\\.product}'");
  EXPECT_EQ(product.output, "Tesla-T4") << "pod was bound to " << node.output;
}

TEST(ClusterSmoke, GarbageCollectorDeletesTheDependentOfADeletedOwner) {
  ASSERT_EQ(Cluster().Kubectl("create configmap gc-owner --from-literal=role=owner").exit_code, 0);
  const auto uid = Cluster().Kubectl("get configmap gc-owner -o jsonpath='{.metadata.uid}'");
  ASSERT_EQ(uid.exit_code, 0) << uid.output;
  const auto dependent = Cluster().Kubectl(R"(apply -f - <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: gc-dependent
  ownerReferences:
    - {apiVersion: v1, kind: ConfigMap, name: gc-owner, uid: )" +
                                           uid.output + R"(}
data: {role: dependent}
YAML)");
  ASSERT_EQ(dependent.exit_code, 0) << dependent.output;

  ASSERT_EQ(Cluster().Kubectl("delete configmap gc-owner --cascade=background").exit_code, 0);
  const auto collected =
      Cluster().Kubectl("wait --for=delete --timeout=90s configmap/gc-dependent");
  EXPECT_EQ(collected.exit_code, 0)
      << "the garbage collector did not delete the dependent: " << collected.output;
}

}  // namespace
}  // namespace fulcrum
