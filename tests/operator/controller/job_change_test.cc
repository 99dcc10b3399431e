#include "operator/controller/job_change.h"

#include <gtest/gtest.h>

namespace fulcrum::controller {
namespace {

using nlohmann::json;

json RunningJob() {
  return json::parse(R"({
    "apiVersion": "fulcrum.dev/v1alpha1", "kind": "HeteroTrainingJob",
    "metadata": {"name": "a", "namespace": "ns", "generation": 3, "resourceVersion": "100",
                 "finalizers": ["fulcrum.dev/coordinator"], "labels": {"team": "x"},
                 "managedFields": [{"manager": "fulcrum-operator"}]},
    "spec": {"globalBatchSize": 256, "replicas": {"min": 2, "max": 8}},
    "status": {"phase": "Running", "step": 10}})");
}

TEST(JobChange, TheOperatorsOwnStatusWriteNeedsNoReconcile) {
  json after = RunningJob();
  after["status"]["step"] = 20;
  after["metadata"]["resourceVersion"] = "101";
  after["metadata"]["managedFields"][0]["time"] = "2026-11-23T11:00:00Z";
  EXPECT_FALSE(ChangedBeyondStatus(RunningJob(), after));
}

TEST(JobChange, SpecLabelsAnnotationsFinalizersAndDeletionNeedOne) {
  const json before = RunningJob();
  json spec = before;
  spec["spec"]["globalBatchSize"] = 512;
  spec["metadata"]["generation"] = 4;
  EXPECT_TRUE(ChangedBeyondStatus(before, spec));
  json labels = before;
  labels["metadata"]["labels"]["team"] = "y";
  EXPECT_TRUE(ChangedBeyondStatus(before, labels));
  json annotations = before;
  annotations["metadata"]["annotations"] = {{"note", "x"}};
  EXPECT_TRUE(ChangedBeyondStatus(before, annotations));
  json finalizers = before;
  finalizers["metadata"]["finalizers"] = json::array();
  EXPECT_TRUE(ChangedBeyondStatus(before, finalizers));
  json deleting = before;
  deleting["metadata"]["deletionTimestamp"] = "2026-11-23T11:00:00Z";
  EXPECT_TRUE(ChangedBeyondStatus(before, deleting));
}

TEST(JobChange, AnythingThatIsNotAnObjectCountsAsAChange) {
  EXPECT_TRUE(ChangedBeyondStatus(nullptr, RunningJob()));
  EXPECT_FALSE(ChangedBeyondStatus(nullptr, nullptr));
}

}  // namespace
}  // namespace fulcrum::controller
