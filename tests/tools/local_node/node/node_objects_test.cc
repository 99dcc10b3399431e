#include "tests/tools/local_node/node/node_objects.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

NodeSpec T4() {
  auto nodes = ParseInventory(
      "nodes: [{namePrefix: t4, count: 1, gpu: {product: Tesla-T4, memoryMiB: 15360, count: 4}}]",
      "t.yaml");
  EXPECT_TRUE(nodes.ok());
  return nodes->at(0);
}

const nlohmann::json* ConditionOf(const nlohmann::json& status, const std::string& type) {
  for (const auto& condition : status["conditions"]) {
    if (condition["type"] == type) return &condition;
  }
  return nullptr;
}

TEST(NodeObjects, RegistrationCarriesLabelsCapacityAndAReadyStatus) {
  const auto now = std::chrono::system_clock::from_time_t(1'800'000'000);
  const nlohmann::json node = NodeForRegistration(T4(), {"127.0.0.1", 10250}, now);
  EXPECT_EQ(node["metadata"]["name"], "t4-0");
  EXPECT_EQ(node["metadata"]["labels"]["nvidia.com/gpu.product"], "Tesla-T4");
  EXPECT_EQ(node["status"]["allocatable"]["nvidia.com/gpu"], "4");
  EXPECT_EQ(node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
  EXPECT_EQ(node["status"]["addresses"][0]["type"], "InternalIP");
  EXPECT_EQ(node["status"]["addresses"][0]["address"], "127.0.0.1");
  const nlohmann::json* ready = ConditionOf(node["status"], "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ((*ready)["status"], "True");
  EXPECT_EQ((*ready)["lastHeartbeatTime"], "2027-01-15T08:00:00Z");
}

TEST(NodeObjects, StatusHeartbeatMovesWhileTheTransitionTimeStays) {
  const auto start = std::chrono::system_clock::from_time_t(1'800'000'000);
  const nlohmann::json status =
      NodeStatus(T4(), {"127.0.0.1", 10250}, start + std::chrono::minutes(5), start);
  const nlohmann::json* ready = ConditionOf(status, "Ready");
  ASSERT_NE(ready, nullptr);
  EXPECT_EQ((*ready)["lastHeartbeatTime"], "2027-01-15T08:05:00Z");
  EXPECT_EQ((*ready)["lastTransitionTime"], "2027-01-15T08:00:00Z");
}

TEST(NodeObjects, LeaseIsHeldByTheNodeAndOwnedByIt) {
  const auto now = std::chrono::system_clock::from_time_t(1'800'000'000);
  const nlohmann::json lease = NodeLease("t4-0", "uid-1", now);
  EXPECT_EQ(lease["metadata"]["namespace"], "kube-node-lease");
  EXPECT_EQ(lease["spec"]["holderIdentity"], "t4-0");
  EXPECT_EQ(lease["spec"]["leaseDurationSeconds"], 40);
  EXPECT_EQ(lease["spec"]["renewTime"], "2027-01-15T08:00:00.000000Z");
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(lease["metadata"]["ownerReferences"][0]["kind"], "Node");
}

}  // namespace
}  // namespace fulcrum::local_node
