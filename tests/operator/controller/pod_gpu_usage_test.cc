#include "operator/controller/pod_gpu_usage.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace fulcrum::controller {
namespace {

kube::CachedObject Pod(const std::string& uid, const std::string& version, const std::string& node,
                       int gpus, const std::string& phase = "Running") {
  nlohmann::json pod = {
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata",
       {{"namespace", "default"},
        {"name", "pod-" + uid},
        {"uid", uid},
        {"resourceVersion", version}}},
      {"spec",
       {{"containers",
         {{{"name", "trainer"},
           {"resources", {{"requests", {{"nvidia.com/gpu", std::to_string(gpus)}}}}}}}}}},
      {"status", {{"phase", phase}}}};
  if (!node.empty()) pod["spec"]["nodeName"] = node;
  return kube::CachedObject::FromJson(pod);
}

TEST(PodGpuUsage, SumsScheduledUnfinishedPodsByNode) {
  PodGpuUsage usage("nvidia.com/gpu");
  const std::map<std::string, int> used = usage.UsedGpus(
      {Pod("a", "1", "node-1", 1), Pod("b", "1", "node-1", 2), Pod("c", "1", "node-2", 1),
       Pod("d", "1", "", 1), Pod("e", "1", "node-2", 4, "Succeeded"),
       Pod("f", "1", "node-2", 4, "Failed")});
  EXPECT_EQ(used, (std::map<std::string, int>{{"node-1", 3}, {"node-2", 1}}));
}

// The reason it exists: every reconcile sums over every trainer pod of the cluster; a pod is
// decoded once per version, not once per reconcile.
TEST(PodGpuUsage, DecodesEachPodVersionOnce) {
  PodGpuUsage usage("nvidia.com/gpu");
  std::vector<kube::CachedObject> pods;
  for (int i = 0; i < 100; ++i) pods.push_back(Pod(std::to_string(i), "1", "node", 1));
  EXPECT_EQ(usage.UsedGpus(pods).at("node"), 100);
  EXPECT_EQ(usage.decoded(), 100u);
  for (int reconcile = 0; reconcile < 10; ++reconcile)
    EXPECT_EQ(usage.UsedGpus(pods).at("node"), 100);
  EXPECT_EQ(usage.decoded(), 100u);

  pods[7] = Pod("7", "2", "node", 1, "Failed");  // a new version: decoded again, and counted
  EXPECT_EQ(usage.UsedGpus(pods).at("node"), 99);
  EXPECT_EQ(usage.decoded(), 101u);
}

TEST(PodGpuUsage, ForgetsPodsGoneFromTheCache) {
  PodGpuUsage usage("nvidia.com/gpu");
  EXPECT_EQ(usage.UsedGpus({Pod("a", "1", "node-1", 1), Pod("b", "1", "node-2", 1)}).size(), 2u);
  EXPECT_EQ(usage.UsedGpus({Pod("b", "1", "node-2", 1)}),
            (std::map<std::string, int>{{"node-2", 1}}));
  EXPECT_EQ(usage.decoded(), 2u);
  // A pod that comes back under the same uid (a relist) is decoded again.
  EXPECT_EQ(usage.UsedGpus({Pod("a", "1", "node-1", 1)}),
            (std::map<std::string, int>{{"node-1", 1}}));
  EXPECT_EQ(usage.decoded(), 3u);
}

}  // namespace
}  // namespace fulcrum::controller
