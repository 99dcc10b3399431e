#include "tests/tools/local_node/node/inventory.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

constexpr const char* kMixed = R"(
nodes:
  - namePrefix: a100
    count: 1
    gpu: {product: A100-SXM4-40GB, memoryMiB: 40960, count: 8}
  - namePrefix: t4
    count: 2
    gpu: {product: Tesla-T4, memoryMiB: 15360, count: 4}
    emulatedSlowdown: 4
    cpu: "8"
)";

TEST(Inventory, ExpandsGroupsIntoNamedNodesWithGpuFeatureDiscoveryLabels) {
  auto nodes = ParseInventory(kMixed, "mixed.yaml");
  ASSERT_TRUE(nodes.ok()) << nodes.error().ToString();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].name, "a100-0");
  EXPECT_EQ((*nodes)[2].name, "t4-1");
  const NodeSpec& t4 = (*nodes)[1];
  EXPECT_EQ(t4.labels.at("nvidia.com/gpu.product"), "Tesla-T4");
  EXPECT_EQ(t4.labels.at("nvidia.com/gpu.memory"), "15360");
  EXPECT_EQ(t4.labels.at("nvidia.com/gpu.count"), "4");
  EXPECT_EQ(t4.labels.at(kManagedByLabel), kManagedByValue);
  EXPECT_EQ(t4.capacity.at("nvidia.com/gpu"), "4");
  EXPECT_EQ(t4.capacity.at("cpu"), "8");
  EXPECT_EQ(t4.capacity.at("memory"), "512Gi");
}

TEST(Inventory, SlowdownDefaultsToOneAndIsCarriedAsALabel) {
  auto nodes = ParseInventory(kMixed, "mixed.yaml");
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[0].slowdown, "1");
  EXPECT_EQ((*nodes)[0].labels.at(kSlowdownLabel), "1");
  EXPECT_EQ((*nodes)[1].slowdown, "4");
  EXPECT_EQ((*nodes)[1].labels.at(kSlowdownLabel), "4");
}

TEST(Inventory, ADuplicateNodeNameIsRefusedNamingTheGroup) {
  auto nodes = ParseInventory(R"(
nodes:
  - {namePrefix: t4, count: 2, gpu: {product: Tesla-T4, memoryMiB: 15360, count: 1}}
  - {namePrefix: t4, count: 1, gpu: {product: Tesla-T4, memoryMiB: 15360, count: 1}}
)",
                              "dup.yaml");
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.error().field, "nodes[1].namePrefix");
  EXPECT_NE(nodes.error().message.find("t4-0"), std::string::npos) << nodes.error().message;
  EXPECT_NE(nodes.error().message.find("dup.yaml"), std::string::npos);
}

TEST(Inventory, MalformedInputsAreRefusedNamingTheField) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  const Case cases[] = {
      {"nodes: [", ""},
      {"nodes: []", "nodes"},
      {"foo: 1", "nodes"},
      {"nodes: [{namePrefix: T4, count: 1, gpu: {product: x, memoryMiB: 1, count: 1}}]",
       "nodes[0].namePrefix"},
      {"nodes: [{namePrefix: t4, count: 0, gpu: {product: x, memoryMiB: 1, count: 1}}]",
       "nodes[0].count"},
      {"nodes: [{namePrefix: t4, count: 1, gpu: {product: 'a b', memoryMiB: 1, count: 1}}]",
       "nodes[0].gpu.product"},
      {"nodes: [{namePrefix: t4, count: 1, gpu: {product: x, memoryMiB: -5, count: 1}}]",
       "nodes[0].gpu.memoryMiB"},
      {"nodes: [{namePrefix: t4, count: 1, gpu: {product: x, memoryMiB: 1, count: 1}, "
       "emulatedSlowdown: 0.5}]",
       "nodes[0].emulatedSlowdown"},
      {"nodes: [{namePrefix: t4, count: 1, gpu: {product: x, memoryMiB: 1, count: 1}, color: red}]",
       "nodes[0].color"},
      {"nodes: [{namePrefix: t4, count: 1, gpu: {product: x, memoryMiB: 1, count: 1}, cpu: lots}]",
       "nodes[0].cpu"},
  };
  for (const Case& c : cases) {
    auto nodes = ParseInventory(c.yaml, "bad.yaml");
    ASSERT_FALSE(nodes.ok()) << c.yaml;
    EXPECT_EQ(nodes.error().field, c.field) << c.yaml << " -> " << nodes.error().message;
    EXPECT_NE(nodes.error().message.find("bad.yaml"), std::string::npos) << nodes.error().message;
  }
}

TEST(Inventory, AMissingFileIsAnErrorNamingTheFlag) {
  auto nodes = LoadInventory("/nonexistent/inventory.yaml");
  ASSERT_FALSE(nodes.ok());
  EXPECT_EQ(nodes.error().field, "--nodes");
}

TEST(Slowdown, AcceptsNumbersFromOneUpAndRefusesTheRest) {
  EXPECT_DOUBLE_EQ(*ParseSlowdown("1"), 1.0);
  EXPECT_DOUBLE_EQ(*ParseSlowdown("2.5"), 2.5);
  for (const char* bad : {"", "0.9", "-2", "fast", "inf", "nan", "2x"}) {
    EXPECT_FALSE(ParseSlowdown(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace fulcrum::local_node
