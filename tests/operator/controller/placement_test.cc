// Where a job's new workers may go: free slots, product caps, and the GPU products the CUDA
// image cannot run.
#include "operator/controller/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fulcrum::controller {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Pair;

GpuNode Gpu(const std::string& name, const std::string& product, std::optional<int> capability,
            int gpus = 1) {
  GpuNode node;
  node.name = name;
  node.product = product;
  node.compute_capability = capability;
  node.allocatable_gpus = gpus;
  node.ready = true;
  return node;
}

TEST(UnsupportedProducts, ProductsBelowTheImagesComputeCapabilityAreNamedOnce) {
  const std::vector<GpuNode> nodes = {
      Gpu("a100-0", "A100-SXM4-40GB", 80), Gpu("v100-0", "Tesla-V100-SXM2-16GB", 70),
      Gpu("v100-1", "Tesla-V100-SXM2-16GB", 70), Gpu("t4-0", "Tesla-T4", 75),
      Gpu("new-0", "Future-GPU", std::nullopt)};
  EXPECT_THAT(UnsupportedProducts(nodes, 75), ElementsAre(Pair("Tesla-V100-SXM2-16GB", 70)));
  EXPECT_TRUE(UnsupportedProducts(nodes, 70).empty());
}

TEST(UnsupportedProducts, AnUnsupportedProductIsDeniedSoItHasNoFreeSlots) {
  JobSpec spec;
  spec.gpus_per_worker = 1;
  const std::vector<GpuNode> nodes = {Gpu("a100-0", "A100", 80), Gpu("v100-0", "V100", 70)};
  const JobSpec placement = WithoutUnsupported(spec, UnsupportedProducts(nodes, 75));
  EXPECT_THAT(placement.gpu_selector.denied, Contains("V100"));
  EXPECT_FALSE(placement.gpu_selector.Admits("V100"));
  EXPECT_TRUE(placement.gpu_selector.Admits("A100"));
}

TEST(FreeSlots, CountsGpusLeftOnCandidatesLessTheJobsWaitingPods) {
  JobSpec spec;
  spec.gpus_per_worker = 1;
  const std::vector<GpuNode> candidates = {Gpu("a", "A100", 80, 2), Gpu("b", "A100", 80, 1)};
  WorkerPod waiting;
  waiting.name = "w-0";
  EXPECT_EQ(FreeSlots(spec, {waiting}, {}, candidates, {{"a", 1}}, {}), 1);
  EXPECT_EQ(FreeSlots(spec, {}, {"b"}, candidates, {}, {}), 2) << "excluded nodes count nothing";
}

}  // namespace
}  // namespace fulcrum::controller
