// The node inventory fed by a real Node informer (real API server from tests/cluster/up): GPU
// nodes appear with their products and priors, a relabel and a cordon change placement, a
// NotReady status removes a node from the candidates, a deleted node is gone, and every change
// that matters calls back (what will enqueue the jobs that can grow or lost a worker).
#include <gtest/gtest.h>

#include <mutex>
#include <set>

#include "operator/controller/node_inventory.h"
#include "operator/kube/cache/informer.h"
#include "tests/operator/kube/kube_test_support.h"

namespace fulcrum::controller {
namespace {

using kube::testing::AdminClient;
using kube::testing::WaitFor;

nlohmann::json GpuNodeObject(const std::string& name, const std::string& product) {
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", product},
              {"nvidia.com/gpu.memory", "16384"},
              {"nvidia.com/gpu.count", "1"},
              {"fulcrum.dev/test", "node-inventory"}}}}}};
}

// Nodes without a kubelet: the test writes the status a kubelet would (allocatable GPUs, Ready).
void SetStatus(kube::ApiClient& client, const std::string& name, bool ready) {
  const nlohmann::json patch = {{"status",
                                 {{"capacity", {{"nvidia.com/gpu", "1"}, {"cpu", "4"}}},
                                  {"allocatable", {{"nvidia.com/gpu", "1"}, {"cpu", "4"}}},
                                  {"conditions",
                                   {{{"type", "Ready"},
                                     {"status", ready ? "True" : "False"},
                                     {"reason", ready ? "KubeletReady" : "KubeletNotReady"},
                                     {"lastHeartbeatTime", "2026-01-01T00:00:00Z"},
                                     {"lastTransitionTime", "2026-01-01T00:00:00Z"}}}}}}};
  kube::PatchOptions options;
  options.subresource = "status";
  auto patched = client.Patch(kube::resources::Nodes(), "", name, kube::PatchType::kStrategicMerge,
                              patch, options);
  ASSERT_TRUE(patched.ok()) << patched.error().ToString();
}

std::vector<std::string> CandidateNames(const NodeInventory& inventory) {
  std::vector<std::string> names;
  for (const GpuNode& node : inventory.Candidates(1, {})) {
    if (node.name.rfind("inv-", 0) == 0) names.push_back(node.name);
  }
  return names;
}

TEST(NodeInventoryIntegration, FollowsGpuNodesThroughRelabelCordonNotReadyAndDeletion) {
  auto client = AdminClient();
  ASSERT_NE(client, nullptr);
  for (const auto& [name, product] :
       {std::pair{"inv-t4", "Tesla-T4"}, std::pair{"inv-a100", "NVIDIA-A100-SXM4-40GB"}}) {
    auto created = client->Create(kube::resources::Nodes(), "", GpuNodeObject(name, product));
    ASSERT_TRUE(created.ok()) << created.error().ToString();
    SetStatus(*client, name, /*ready=*/true);
  }

  NodeInventory inventory(GpuLabelKeys{}, {"nvidia.com/gpu"});
  std::mutex mutex;
  std::multiset<std::string> changes;
  kube::Informer informer(client, kube::resources::Nodes());
  FeedInventory(informer, inventory, [&](const std::string& node) {
    std::lock_guard lock(mutex);
    changes.insert(node);
  });
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(std::chrono::seconds(60)));
  auto changes_of = [&](const std::string& node) {
    std::lock_guard lock(mutex);
    return changes.count(node);
  };

  // Both appear, the faster product first, with the catalog's prior.
  ASSERT_TRUE(WaitFor([&] { return CandidateNames(inventory).size() == 2; }));
  EXPECT_EQ(CandidateNames(inventory), (std::vector<std::string>{"inv-a100", "inv-t4"}));
  EXPECT_GT(*inventory.Get("inv-a100")->prior_speed, *inventory.Get("inv-t4")->prior_speed);

  // Relabelled as a faster product: the order follows.
  const std::size_t before_relabel = changes_of("inv-t4");
  auto relabelled = client->Patch(
      kube::resources::Nodes(), "", "inv-t4", kube::PatchType::kMerge,
      {{"metadata", {{"labels", {{"nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"}}}}}});
  ASSERT_TRUE(relabelled.ok()) << relabelled.error().ToString();
  ASSERT_TRUE(WaitFor([&] { return inventory.Get("inv-t4")->product == "NVIDIA-H100-80GB-HBM3"; }));
  EXPECT_EQ(CandidateNames(inventory), (std::vector<std::string>{"inv-t4", "inv-a100"}));
  EXPECT_GT(changes_of("inv-t4"), before_relabel);

  // Cordoned: no longer a candidate, still known.
  auto cordoned = client->Patch(kube::resources::Nodes(), "", "inv-a100", kube::PatchType::kMerge,
                                {{"spec", {{"unschedulable", true}}}});
  ASSERT_TRUE(cordoned.ok()) << cordoned.error().ToString();
  ASSERT_TRUE(
      WaitFor([&] { return CandidateNames(inventory) == std::vector<std::string>{"inv-t4"}; }));
  EXPECT_TRUE(inventory.Get("inv-a100").has_value());

  // NotReady: gone from the candidates too.
  SetStatus(*client, "inv-t4", /*ready=*/false);
  ASSERT_TRUE(WaitFor([&] { return CandidateNames(inventory).empty(); }));

  // Deleted: gone from the inventory, with a callback.
  const std::size_t before_delete = changes_of("inv-a100");
  ASSERT_TRUE(client->Delete(kube::resources::Nodes(), "", "inv-a100").ok());
  ASSERT_TRUE(WaitFor([&] { return !inventory.Get("inv-a100").has_value(); }));
  EXPECT_GT(changes_of("inv-a100"), before_delete);
  informer.Stop();
  EXPECT_TRUE(client->Delete(kube::resources::Nodes(), "", "inv-t4").ok());
}

}  // namespace
}  // namespace fulcrum::controller
