// crds/fulcrum.dev_heterotrainingjobs.yaml as the API server enforces it (a real control plane
// from tests/cluster/up): every example is admitted; every manifest in tests/e2e/invalid is
// refused with a message naming the field (each file's "# expect:" lines); the immutable fields
// cannot change on a running job while the live ones can; the Helm chart carries the same CRD;
// a stored job's spec.template, merged by the operator, makes a pod the API server accepts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "operator/controller/job_objects.h"
#include "tests/support/polling.h"
#include "tests/support/subprocess.h"
#include "tests/support/temporary_directory.h"
#include "tests/support/test_cluster.h"

namespace fulcrum::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kCrd = "crds/fulcrum.dev_heterotrainingjobs.yaml";

std::vector<std::filesystem::path> YamlFilesIn(const std::string& relative) {
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath(relative))) {
    if (entry.path().extension() == ".yaml") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// The "# expect: TEXT" lines of an invalid manifest.
std::vector<std::string> ExpectedMessages(const std::filesystem::path& file) {
  std::vector<std::string> expected;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const std::string prefix = "# expect: ";
    if (line.rfind(prefix, 0) == 0) expected.push_back(line.substr(prefix.size()));
  }
  return expected;
}

class CrdValidation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const CommandResult applied = Cluster().Kubectl("apply -f " + SourcePath(kCrd));
    ASSERT_EQ(applied.exit_code, 0) << applied.output;
    const CommandResult established =
        Cluster().WaitForCondition("crd/heterotrainingjobs.fulcrum.dev", "established");
    ASSERT_EQ(established.exit_code, 0) << established.output;
  }
};

TEST(CrdFiles, TheHelmChartCarriesTheSameCrd) {
  EXPECT_EQ(ReadFile(SourcePath("helm/fulcrum/crds/fulcrum.dev_heterotrainingjobs.yaml")),
            ReadFile(SourcePath(kCrd)));
}

TEST_F(CrdValidation, EveryExampleIsAdmitted) {
  const auto examples = YamlFilesIn("crds/examples");
  ASSERT_GE(examples.size(), 3u);
  for (const auto& example : examples) {
    const CommandResult result = Cluster().Kubectl("apply --dry-run=server -f " + example.string());
    EXPECT_EQ(result.exit_code, 0) << example.filename() << ":\n" << result.output;
  }
}

TEST_F(CrdValidation, EveryInvalidManifestIsRefusedNamingTheField) {
  const auto invalid = YamlFilesIn("tests/e2e/invalid");
  ASSERT_GE(invalid.size(), 15u);
  for (const auto& manifest : invalid) {
    const std::vector<std::string> expected = ExpectedMessages(manifest);
    ASSERT_FALSE(expected.empty()) << manifest.filename() << " has no '# expect:' line";
    const CommandResult result =
        Cluster().Kubectl("apply --dry-run=server -f " + manifest.string());
    EXPECT_NE(result.exit_code, 0) << manifest.filename() << " was admitted";
    for (const std::string& message : expected) {
      EXPECT_THAT(result.output, HasSubstr(message)) << manifest.filename();
    }
  }
}

TEST_F(CrdValidation, ImmutableFieldsCannotChangeWhileLiveFieldsCan) {
  const CommandResult created =
      Cluster().Kubectl("apply -f " + SourcePath("crds/examples/elastic.yaml"));
  ASSERT_EQ(created.exit_code, 0) << created.output;
  auto patch = [](const std::string& json) {
    return Cluster().Kubectl("patch htj elastic --type merge --dry-run=server -p '" + json + "'");
  };
  const std::vector<std::pair<std::string, std::string>> immutable = {
      {R"({"spec":{"image":"example.com/other-trainer:1"}})", "image is immutable"},
      {R"({"spec":{"model":{"builtin":"mlp"}}})", "model is immutable"},
      {R"({"spec":{"dataset":{"synthetic":{"samples":10}}}})", "dataset is immutable"},
      {R"({"spec":{"training":{"optimizer":"adam","momentum":null}}})",
       "training.optimizer is immutable"},
      {R"({"spec":{"gpusPerWorker":0}})", "gpusPerWorker is immutable"},
      {R"({"spec":{"training":{"weightDecay":0.01}}})", "training.weightDecay is immutable"},
      {R"({"spec":{"training":{"gradientClipNorm":1.0}}})",
       "training.gradientClipNorm is immutable"},
      {R"({"spec":{"training":{"schedule":{"kind":"cosine"}}}})", "training.schedule is immutable"},
      {R"({"spec":{"initFrom":{"path":"/models/base/model.pt"}}})", "initFrom is immutable"},
      {R"({"spec":{"training":{"precision":"bf16"}}})", "training.precision is immutable"},
      {R"({"spec":{"output":{"path":"/models/out"}}})", "output is immutable"},
      {R"({"spec":{"runtime":"python","command":["python3","train.py"]}})", "runtime is immutable"},
  };
  for (const auto& [json, message] : immutable) {
    const CommandResult result = patch(json);
    EXPECT_NE(result.exit_code, 0) << json << " was admitted";
    EXPECT_THAT(result.output, HasSubstr(message)) << json;
  }
  const std::vector<std::string> live = {
      R"({"spec":{"globalBatchSize":256}})",
      R"({"spec":{"replicas":{"min":2,"max":4}}})",
      R"({"spec":{"balancing":{"policy":"proportional","minGain":0.1}}})",
      R"({"spec":{"suspend":true}})",
  };
  for (const std::string& json : live) {
    const CommandResult result = patch(json);
    EXPECT_EQ(result.exit_code, 0) << json << ":\n" << result.output;
  }
  // The columns kubectl shows for the job.
  const CommandResult listed = Cluster().Kubectl("get htj elastic");
  ASSERT_EQ(listed.exit_code, 0) << listed.output;
  for (const char* column :
       {"PHASE", "WORKERS", "STEP", "SAMPLES/S", "EFFICIENCY", "LOSS", "ACCURACY", "AGE"}) {
    EXPECT_THAT(listed.output, HasSubstr(column));
  }
  // The figures print as people read them (the operator's status.summary), not as JSON floats.
  const CommandResult patched = Cluster().Kubectl(
      "patch htj elastic --subresource=status --type merge -p "
      "'{\"status\":{\"phase\":\"Running\",\"throughput\":{\"samplesPerSecond\":"
      "960.3433732525883,\"efficiency\":0.8724228085719674},\"summary\":{"
      "\"samplesPerSecond\":\"960\",\"efficiency\":\"87%\",\"loss\":\"0.4123\"}}}'");
  ASSERT_EQ(patched.exit_code, 0) << patched.output;
  const CommandResult figures = Cluster().Kubectl("get htj elastic");
  EXPECT_THAT(figures.output, HasSubstr(" 960 "));
  EXPECT_THAT(figures.output, HasSubstr(" 87% "));
  EXPECT_THAT(figures.output, HasSubstr(" 0.4123 "));
  EXPECT_THAT(figures.output, Not(HasSubstr("960.34"))) << figures.output;
  EXPECT_THAT(Cluster().Kubectl("get htj elastic -o wide").output, HasSubstr("IDEAL/S"));
  EXPECT_EQ(Cluster().Kubectl("delete htj elastic --wait=false").exit_code, 0);
}

// The pod-template example as the API server stores it (defaults applied, volume sources and
// affinity kept through x-kubernetes-preserve-unknown-fields), parsed and merged into a trainer
// pod by the operator's own code, is a pod the API server admits: the ANDed node affinity, the
// quantities, the env from a Secret. Its service account and priority class exist first, as
// admission requires.
TEST_F(CrdValidation, TheTemplateExampleMakesATrainerPodTheApiServerAdmits) {
  ASSERT_EQ(Cluster().Kubectl("create serviceaccount trainer").exit_code, 0);
  ASSERT_EQ(Cluster().Kubectl("create priorityclass training --value 1000").exit_code, 0);
  const CommandResult created =
      Cluster().Kubectl("apply -f " + SourcePath("crds/examples/pod-template.yaml"));
  ASSERT_EQ(created.exit_code, 0) << created.output;
  const CommandResult stored = Cluster().Kubectl("get htj pod-template -o json");
  ASSERT_EQ(stored.exit_code, 0) << stored.output;
  const Result<controller::JobSpec> spec =
      controller::ParseJobSpec(nlohmann::json::parse(stored.output));
  ASSERT_TRUE(spec.ok()) << spec.error().ToString();
  controller::TrainerPodOptions options;
  options.coordinator_address = "fulcrum-operator.fulcrum-system.svc:7070";
  options.product_speeds = {{"A100-SXM4-40GB", 2.06}, {"Tesla-T4", 0.354}};
  options.excluded_nodes = {"t4-0"};
  const nlohmann::json pod = controller::TrainerPod(*spec, 0, options);
  EXPECT_EQ(pod["spec"]["volumes"].size(), 3u);
  EXPECT_EQ(pod["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"], "imagenet-packed");
  TemporaryDirectory directory("crd-pod");
  const std::string file = (directory.path() / "pod.json").string();
  std::ofstream(file) << pod.dump();
  const CommandResult admitted = Cluster().Kubectl("create --dry-run=server -f " + file);
  EXPECT_EQ(admitted.exit_code, 0) << admitted.output << "\n" << pod.dump(2);
  EXPECT_EQ(Cluster().Kubectl("delete htj pod-template --wait=false").exit_code, 0);
  EXPECT_EQ(Cluster().Kubectl("delete priorityclass training").exit_code, 0);
  EXPECT_EQ(Cluster().Kubectl("delete serviceaccount trainer").exit_code, 0);
}

}  // namespace
}  // namespace fulcrum::testing
