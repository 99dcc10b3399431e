// spec.template read from a stored job: what it may set is read, and what the operator owns or
// the pod could not use is refused with an error naming the field and the fix. The merge into
// the trainer pod is tested through TrainerPod (job_objects_test.cc).
#include "operator/controller/pod_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "operator/controller/job_spec.h"

namespace fulcrum::controller {
namespace {

using ::testing::HasSubstr;

nlohmann::json JobWithTemplate(const nlohmann::json& pod_template) {
  nlohmann::json job = nlohmann::json::parse(R"({
    "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
    "spec": {"model": {"builtin": "mlp"}, "globalBatchSize": 32, "replicas": {"min": 1, "max": 2},
             "training": {"steps": 10}}})");
  job["spec"]["template"] = pod_template;
  return job;
}

// A template whose trainer container is `trainer` (merged over a valid one).
nlohmann::json WithTrainer(const nlohmann::json& trainer,
                           const nlohmann::json& pod = nlohmann::json::object()) {
  nlohmann::json container = {{"name", "trainer"}};
  if (trainer.is_object()) container.update(trainer);
  nlohmann::json spec = {{"volumes", {{{"name", "data"}, {"emptyDir", nlohmann::json::object()}}}},
                         {"containers", {container}}};
  if (pod.is_object()) spec.update(pod);
  return {{"spec", spec}};
}

TEST(ParsePodTemplate, ReadsWhatATemplateMaySet) {
  const Result<JobSpec> spec = ParseJobSpec(JobWithTemplate(nlohmann::json::parse(R"j({
    "metadata": {"labels": {"team": "vision"}, "annotations": {"a": "b"}},
    "spec": {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}}],
             "serviceAccountName": "trainer", "priorityClassName": "training",
             "nodeSelector": {"pool": "gpu"},
             "containers": [{"name": "trainer",
                             "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                             "env": [{"name": "KEY", "valueFrom": {"secretKeyRef":
                                        {"name": "s", "key": "k"}}}],
                             "resources": {"requests": {"cpu": 2}}}]}})j")));
  ASSERT_TRUE(spec.ok()) << spec.error().ToString();
  const PodTemplate& pod = spec->pod_template;
  EXPECT_EQ(pod.labels.at("team"), "vision");
  EXPECT_EQ(pod.volumes[0]["persistentVolumeClaim"]["claimName"], "imagenet");
  EXPECT_EQ(pod.service_account_name, "trainer");
  EXPECT_EQ(pod.priority_class_name, "training");
  EXPECT_EQ(pod.node_selector.at("pool"), "gpu");
  EXPECT_EQ(pod.volume_mounts[0]["mountPath"], "/data");
  EXPECT_EQ(pod.env[0]["valueFrom"]["secretKeyRef"]["key"], "k");
  EXPECT_EQ(pod.requests["cpu"], 2);
  // No template: nothing of the user's.
  nlohmann::json plain = JobWithTemplate(nullptr);
  plain["spec"].erase("template");
  EXPECT_TRUE(ParseJobSpec(plain)->pod_template.volumes.empty());
}

struct Refused {
  nlohmann::json pod_template;
  std::string field;
  std::string message;  // a part of the message: what to do instead
};

TEST(ParsePodTemplate, RefusesWhatTheOperatorOwnsNamingTheFieldAndTheFix) {
  const std::string trainer = "spec.template.spec.containers[0]";
  const std::vector<Refused> cases = {
      {WithTrainer({{"volumeMounts", {{{"name", "dataa"}, {"mountPath", "/data"}}}}}),
       trainer + ".volumeMounts[0].name", "add the volume there or fix the name"},
      {WithTrainer(
           {{"volumeMounts", {{{"name", "data"}, {"mountPath", "/var/run/fulcrum/token"}}}}}),
       trainer + ".volumeMounts[0].mountPath", "mount the volume elsewhere"},
      {WithTrainer(
           {{"volumeMounts",
             {{{"name", "data"}, {"mountPath", "/d"}}, {{"name", "data"}, {"mountPath", "/d"}}}}}),
       trainer + ".volumeMounts[1].mountPath", "two volumes are mounted at /d"},
      {WithTrainer({}, {{"volumes",
                         {{{"name", "fulcrum-token"}, {"emptyDir", nlohmann::json::object()}}}}}),
       "spec.template.spec.volumes[0].name", "rename the volume"},
      {WithTrainer({{"env", {{{"name", "FULCRUM_COORDINATOR"}, {"value", "x"}}}}}),
       trainer + ".env[0].name", "is the operator's"},
      {WithTrainer({{"env", {{{"name", "POD_NAME"}, {"value", "x"}}}}}), trainer + ".env[0].name",
       "use another name"},
      {WithTrainer(
           {{"env", {{{"name", "A"}, {"value", "x"}, {"valueFrom", nlohmann::json::object()}}}}}),
       trainer + ".env[0]", "not both"},
      {WithTrainer({{"resources", {{"limits", {{"nvidia.com/gpu", "2"}}}}}}),
       trainer + ".resources.limits.nvidia.com/gpu", "set spec.gpusPerWorker"},
      {WithTrainer({{"resources", {{"requests", {{"amd.com/gpu", "2"}}}}}}),
       trainer + ".resources.requests.amd.com/gpu", "set spec.gpusPerWorker"},
      {WithTrainer({{"image", "x"}}), trainer + ".image", "spec.image"},
      {WithTrainer({{"command", {"sh"}}}), trainer + ".command", "spec.command"},
      {WithTrainer({{"args", {"--x"}}}), trainer + ".args", "spec.args"},
      {WithTrainer({{"name", "main"}}), trainer + ".name", "name it trainer"},
      {WithTrainer({{"ports", nlohmann::json::array()}}), trainer + ".ports",
       "a template sets name, volumeMounts"},
      {WithTrainer({}, {{"restartPolicy", "Always"}}), "spec.template.spec.restartPolicy",
       "spec.runPolicy.backoffLimit"},
      {WithTrainer({}, {{"nodeName", "a100-0"}}), "spec.template.spec.nodeName",
       "use spec.template.spec.nodeSelector or affinity"},
      {WithTrainer({}, {{"hostNetwork", true}}), "spec.template.spec.hostNetwork",
       "is not a template field"},
      {WithTrainer({}, {{"containers", {{{"name", "trainer"}}, {{"name", "sidecar"}}}}}),
       "spec.template.spec.containers", "one container, trainer"},
      {{{"metadata", {{"labels", {{"fulcrum.dev/job", "other"}}}}}},
       "spec.template.metadata.labels",
       "use another key"},
      {{{"metadata", {{"labels", {{"app.kubernetes.io/managed-by", "me"}}}}}},
       "spec.template.metadata.labels",
       "use another key"},
      {{{"metadata", {{"annotations", {{"fulcrum.dev/x", "1"}}}}}},
       "spec.template.metadata.annotations",
       "use another key"},
      {WithTrainer({}, {{"affinity", nlohmann::json::parse(R"({"nodeAffinity":
          {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}})")}}),
       "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
       "nodeSelectorTerms[0]",
       "an empty term matches no node"},
      {WithTrainer({}, {{"volumes", {{"name", "data"}}}}), "spec.template.spec.volumes",
       "must be a list"},
      {WithTrainer({}, {{"nodeSelector", {{"pool", 1}}}}), "spec.template.spec.nodeSelector.pool",
       "must be a string"},
  };
  // A name in both spec.env and the template's env.
  nlohmann::json both = JobWithTemplate(WithTrainer(
      {{"env", {{{"name", "B"}, {"value", "1"}}, {{"name", "OMP_NUM_THREADS"}, {"value", "2"}}}}}));
  both["spec"]["env"] = {{{"name", "OMP_NUM_THREADS"}, {"value", "1"}}};
  const Result<JobSpec> twice = ParseJobSpec(both);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.error().field, trainer + ".env[1].name");
  EXPECT_THAT(twice.error().message, HasSubstr("is also in spec.env: set it in one place"));
  for (const Refused& refused : cases) {
    const Result<JobSpec> spec = ParseJobSpec(JobWithTemplate(refused.pod_template));
    ASSERT_FALSE(spec.ok()) << refused.pod_template;
    EXPECT_EQ(spec.error().field, refused.field) << spec.error().ToString();
    EXPECT_THAT(spec.error().message, HasSubstr(refused.message)) << refused.field;
  }
}

TEST(AndNodeAffinity, EitherSideAloneIsKeptAndPreferredTermsAreConcatenated) {
  const nlohmann::json ours = nlohmann::json::parse(R"({
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]},
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {}}]})");
  const nlohmann::json theirs = nlohmann::json::parse(R"({
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "preference": {}}]})");
  const nlohmann::json joined = AndNodeAffinity(ours, theirs);
  EXPECT_EQ(joined["requiredDuringSchedulingIgnoredDuringExecution"],
            ours["requiredDuringSchedulingIgnoredDuringExecution"]);
  ASSERT_EQ(joined["preferredDuringSchedulingIgnoredDuringExecution"].size(), 2u);
  EXPECT_EQ(joined["preferredDuringSchedulingIgnoredDuringExecution"][1]["weight"], 3);
  EXPECT_EQ(AndNodeAffinity(nlohmann::json::object(), ours), ours);
  EXPECT_TRUE(AndNodeAffinity(nlohmann::json::object(), nlohmann::json::object()).empty());
  // Two terms on each side: four, every pair's requirements together.
  nlohmann::json two = ours;
  two["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].push_back(
      {{"matchFields", {{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"n"}}}}}});
  const nlohmann::json four = AndNodeAffinity(two, two);
  const nlohmann::json& terms =
      four["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 4u);
  EXPECT_EQ(terms[1]["matchExpressions"].size(), 1u);
  EXPECT_EQ(terms[1]["matchFields"].size(), 1u);
  EXPECT_EQ(terms[3]["matchFields"].size(), 2u);
  EXPECT_FALSE(terms[3].contains("matchExpressions"));
}

}  // namespace
}  // namespace fulcrum::controller
