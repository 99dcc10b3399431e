#include "operator/controller/gpu_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/node_inventory.h"

namespace fulcrum::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

nlohmann::json Node(const std::string& name, nlohmann::json labels, const std::string& gpus = "1",
                    bool ready = true) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"status",
           {{"allocatable", {{"cpu", "8"}, {"nvidia.com/gpu", gpus}}},
            {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

nlohmann::json GfdLabels(const std::string& product, const std::string& memory_mib = "16384") {
  return {{"nvidia.com/gpu.product", product},
          {"nvidia.com/gpu.memory", memory_mib},
          {"nvidia.com/gpu.count", "1"}};
}

std::vector<std::string> Names(const std::vector<GpuNode>& nodes) {
  std::vector<std::string> names;
  for (const GpuNode& node : nodes) names.push_back(node.name);
  return names;
}

TEST(ReadGpuNode, ReadsGpuFeatureDiscoveryLabelsAllocatableAndReadiness) {
  const GpuNode node = ReadGpuNode(Node("v100-0", GfdLabels("Tesla-V100-SXM2-16GB"), "4"));
  EXPECT_EQ(node.name, "v100-0");
  EXPECT_EQ(node.product, "Tesla-V100-SXM2-16GB");
  EXPECT_EQ(node.memory_bytes, int64_t{16384} << 20);
  EXPECT_EQ(node.labelled_gpus, 1);
  EXPECT_EQ(node.allocatable_gpus, 4);
  EXPECT_TRUE(node.ready);
  EXPECT_FALSE(node.unschedulable);
  ASSERT_TRUE(node.prior_speed.has_value());
  EXPECT_DOUBLE_EQ(*node.prior_speed, 1.0);  // the catalog's reference product
  EXPECT_TRUE(node.problems.empty());
}

TEST(ReadGpuNode, OtherVendorsLabelsUnderConfiguredKeys) {
  GpuLabelKeys keys;
  keys.product = "amd.com/gpu.product-name";
  keys.memory_mib = "amd.com/gpu.vram-mib";
  keys.count = "amd.com/gpu.count";
  keys.resource = "amd.com/gpu";
  nlohmann::json node = {
      {"metadata",
       {{"name", "mi"},
        {"labels", {{"amd.com/gpu.product-name", "MI250X"}, {"amd.com/gpu.vram-mib", "65536"}}}}},
      {"status", {{"allocatable", {{"amd.com/gpu", "2"}}}}}};
  const GpuNode read = ReadGpuNode(node, keys);
  EXPECT_EQ(read.product, "MI250X");
  EXPECT_EQ(read.memory_bytes, int64_t{65536} << 20);
  EXPECT_EQ(read.allocatable_gpus, 2);
  EXPECT_FALSE(read.prior_speed.has_value());  // not in the catalog: measured from the start
  EXPECT_FALSE(read.ready);                    // no Ready condition reported
}

TEST(ReadGpuNode, UnreadableLabelsAreReportedNamingTheLabelAndTheCatalogFillsMemory) {
  const GpuNode node = ReadGpuNode(Node("a100", GfdLabels("NVIDIA-A100-SXM4-40GB", "lots")));
  ASSERT_EQ(node.problems.size(), 1u);
  EXPECT_THAT(node.problems[0], HasSubstr("nvidia.com/gpu.memory=\"lots\""));
  EXPECT_EQ(node.memory_bytes, int64_t{40} << 30);  // from the product's "40GB"
  EXPECT_GT(*node.prior_speed, 1.0);
}

TEST(CanPlaceWorker, NeedsReadyUncordonedUntaintedNodesWithEnoughGpus) {
  const std::vector<std::string> tolerated = {"nvidia.com/gpu"};
  GpuNode node = ReadGpuNode(Node("t4", GfdLabels("Tesla-T4"), "1"));
  EXPECT_TRUE(CanPlaceWorker(node, 1, tolerated));
  EXPECT_FALSE(CanPlaceWorker(node, 2, tolerated));  // one GPU allocatable
  GpuNode not_ready = ReadGpuNode(Node("t4", GfdLabels("Tesla-T4"), "1", /*ready=*/false));
  EXPECT_FALSE(CanPlaceWorker(not_ready, 1, tolerated));
  GpuNode cordoned = node;
  cordoned.unschedulable = true;
  EXPECT_FALSE(CanPlaceWorker(cordoned, 1, tolerated));
  GpuNode tainted = node;
  tainted.taints = {{"nvidia.com/gpu", "present", "NoSchedule"}};
  EXPECT_TRUE(CanPlaceWorker(tainted, 1, tolerated));  // the GPU taint trainer pods tolerate
  tainted.taints.push_back({"maintenance", "", "NoExecute"});
  EXPECT_FALSE(CanPlaceWorker(tainted, 1, tolerated));
  tainted.taints.back().effect = "PreferNoSchedule";  // a preference, not a barrier
  EXPECT_TRUE(CanPlaceWorker(tainted, 1, tolerated));
  GpuNode cpu_only = ReadGpuNode(Node("cpu", nlohmann::json::object(), "0"));
  EXPECT_FALSE(CanPlaceWorker(cpu_only, 1, tolerated));
  EXPECT_TRUE(CanPlaceWorker(cpu_only, 0, tolerated));  // CPU workers
}

TEST(NodeInventory, CandidatesPreferFasterProductsAndFollowTheSelector) {
  NodeInventory inventory;
  inventory.Upsert(Node("t4-0", GfdLabels("Tesla-T4")));
  inventory.Upsert(Node("a100-0", GfdLabels("NVIDIA-A100-SXM4-40GB")));
  inventory.Upsert(Node("mystery-0", GfdLabels("Acme-X1")));
  inventory.Upsert(Node("v100-0", GfdLabels("Tesla-V100-SXM2-16GB")));
  inventory.Upsert(Node("v100-down", GfdLabels("Tesla-V100-SXM2-16GB"), "1", /*ready=*/false));
  EXPECT_THAT(Names(inventory.Candidates(1, {})),
              ElementsAre("a100-0", "v100-0", "t4-0", "mystery-0"));
  EXPECT_THAT(Names(inventory.Candidates(
                  1, {.allowed = {"Tesla-T4", "Tesla-V100-SXM2-16GB"}, .denied = {}})),
              ElementsAre("v100-0", "t4-0"));
  EXPECT_THAT(Names(inventory.Candidates(1, {.allowed = {}, .denied = {"NVIDIA-A100-SXM4-40GB"}})),
              ElementsAre("v100-0", "t4-0", "mystery-0"));
}

TEST(NodeInventory, VersionChangesOnlyWhenPlacementCould) {
  NodeInventory inventory;
  nlohmann::json node = Node("t4-0", GfdLabels("Tesla-T4"));
  inventory.Upsert(node);
  const uint64_t after_add = inventory.version();
  node["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-11-22T20:00:00Z";
  inventory.Upsert(node);  // a heartbeat: nothing placement depends on
  EXPECT_EQ(inventory.version(), after_add);
  node["spec"]["unschedulable"] = true;
  inventory.Upsert(node);
  EXPECT_GT(inventory.version(), after_add);
  const uint64_t after_cordon = inventory.version();
  inventory.Remove("t4-0");
  EXPECT_GT(inventory.version(), after_cordon);
  EXPECT_FALSE(inventory.Get("t4-0").has_value());
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

TEST(ReadGpuNode, ComputeCapabilityComesFromTheNodesLabelsElseTheCatalog) {
  EXPECT_EQ(ReadGpuNode(Node("v100", GfdLabels("Tesla-V100-SXM2-16GB"))).compute_capability, 70);
  EXPECT_EQ(ReadGpuNode(Node("t4", GfdLabels("Tesla-T4"))).compute_capability, 75);
  nlohmann::json labels = GfdLabels("NVIDIA-Future-GPU");
  EXPECT_FALSE(ReadGpuNode(Node("new", labels)).compute_capability.has_value());
  labels["nvidia.com/gpu.compute.major"] = "12";
  labels["nvidia.com/gpu.compute.minor"] = "1";
  EXPECT_EQ(ReadGpuNode(Node("new", labels)).compute_capability, 121);
  labels["nvidia.com/gpu.compute.major"] = "twelve";
  const GpuNode unreadable = ReadGpuNode(Node("new", labels));
  EXPECT_FALSE(unreadable.compute_capability.has_value());
  ASSERT_EQ(unreadable.problems.size(), 1u);
  EXPECT_THAT(unreadable.problems[0], HasSubstr("is not a compute capability"));
}

}  // namespace
}  // namespace fulcrum::controller
