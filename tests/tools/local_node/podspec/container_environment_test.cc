#include "tests/tools/local_node/podspec/container_environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/tools/local_node/podspec/fake_pod_references.h"

namespace fulcrum::local_node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const PodRuntimeFacts kEnvironmentFacts{.pod_ip = "10.1.0.7", .host_ip = "192.168.0.2"};

Json Pod(Json container) {
  return Json{{"metadata",
               {{"name", "trainer-0"},
                {"namespace", "jobs"},
                {"uid", "uid-123"},
                {"labels", {{"app", "trainer"}, {"rank", "0"}}},
                {"annotations", {{"fulcrum.dev/slot", "3"}}}}},
              {"spec",
               {{"nodeName", "gpu-node-1"},
                {"serviceAccountName", "trainer-sa"},
                {"containers", Json::array({std::move(container)})}}}};
}

// The value, or the error as text, so that a failure shows in the comparison.
std::string Text(const Result<std::string>& value) {
  return value.ok() ? *value : "error: " + value.error().ToString();
}

class ContainerEnvironmentTest : public ::testing::Test {
 protected:
  Result<std::vector<EnvVar>> Build(const Json& container, const std::vector<EnvVar>& base = {}) {
    return BuildContainerEnvironment(Pod(container), container, "spec.containers[0]",
                                     kEnvironmentFacts, references_, base);
  }
  // The value of one variable built from `value_from`, or the error.
  Result<std::string> ValueFrom(const Json& value_from, const Json& resources = Json::object()) {
    Json container = {{"name", "main"},
                      {"resources", resources},
                      {"env", Json::array({{{"name", "V"}, {"valueFrom", value_from}}})}};
    Result<std::vector<EnvVar>> environment = Build(container);
    if (!environment.ok()) return environment.error();
    if (environment->size() != 1) return MakeError(ErrorCode::kNotFound, "V is not set");
    return (*environment)[0].value;
  }

  FakePodReferences references_;
};

TEST_F(ContainerEnvironmentTest, PutsBaseThenEnvFromThenEnvInOrder) {
  references_.AddConfigMap("jobs", "settings", {{"B", "2"}, {"A", "1"}});
  Json container = {{"name", "main"},
                    {"envFrom", Json::array({{{"configMapRef", {{"name", "settings"}}}}})},
                    {"env", Json::array({{{"name", "X"}, {"value", "x"}}})}};
  Result<std::vector<EnvVar>> environment = Build(container, {{"NODE", "n"}});
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_THAT(*environment, ElementsAre(EnvVar{"NODE", "n"}, EnvVar{"A", "1"}, EnvVar{"B", "2"},
                                        EnvVar{"X", "x"}));
}

TEST_F(ContainerEnvironmentTest, ALaterDuplicateReplacesTheValueButKeepsTheFirstPosition) {
  references_.AddConfigMap("jobs", "settings", {{"A", "from-config-map"}});
  Json container = {{"name", "main"},
                    {"envFrom", Json::array({{{"configMapRef", {{"name", "settings"}}}}})},
                    {"env", Json::array({{{"name", "B"}, {"value", "b"}},
                                         {{"name", "A"}, {"value", "from-env"}},
                                         {{"name", "B"}, {"value", "b2"}}})}};
  Result<std::vector<EnvVar>> environment = Build(container, {{"B", "base"}});
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_THAT(*environment, ElementsAre(EnvVar{"B", "b2"}, EnvVar{"A", "from-env"}));
}

TEST_F(ContainerEnvironmentTest, EnvFromPrefixesEveryKey) {
  references_.AddSecret("jobs", "creds", {{"user", "u"}, {"password", "p"}});
  Json container = {
      {"name", "main"},
      {"envFrom", Json::array({{{"prefix", "DB_"}, {"secretRef", {{"name", "creds"}}}}})}};
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_THAT(*environment, ElementsAre(EnvVar{"DB_password", "p"}, EnvVar{"DB_user", "u"}));
}

TEST_F(ContainerEnvironmentTest, EnvFromSkipsAMissingOptionalObject) {
  Json container = {
      {"name", "main"},
      {"envFrom", Json::array({{{"configMapRef", {{"name", "absent"}, {"optional", true}}}}})},
      {"env", Json::array({{{"name", "X"}, {"value", "x"}}})}};
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_THAT(*environment, ElementsAre(EnvVar{"X", "x"}));
}

TEST_F(ContainerEnvironmentTest,
       EnvFromOfAMissingRequiredObjectIsAFailedPreconditionNamingTheField) {
  Json container = {{"name", "main"},
                    {"envFrom", Json::array({{{"secretRef", {{"name", "creds"}}}},
                                             {{"configMapRef", {{"name", "absent"}}}}})}};
  references_.AddSecret("jobs", "creds", {});
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_FALSE(environment.ok());
  EXPECT_EQ(environment.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(environment.error().field, "spec.containers[0].envFrom[1].configMapRef");
  EXPECT_THAT(environment.error().message, HasSubstr("ConfigMap jobs/absent does not exist"));
}

TEST_F(ContainerEnvironmentTest, ExpandsALiteralValueAgainstTheVariablesBeforeIt) {
  references_.AddConfigMap("jobs", "settings", {{"PORT", "8080"}});
  Json container = {
      {"name", "main"},
      {"envFrom", Json::array({{{"configMapRef", {{"name", "settings"}}}}})},
      {"env", Json::array({{{"name", "HOST"}, {"value", "h"}},
                           {{"name", "URL"}, {"value", "$(NODE)/$(HOST):$(PORT)/$(LATER)"}},
                           {{"name", "LATER"}, {"value", "late"}}})}};
  Result<std::vector<EnvVar>> environment = Build(container, {{"NODE", "n1"}});
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_EQ((*environment)[3], (EnvVar{"URL", "n1/h:8080/$(LATER)"}));
}

TEST_F(ContainerEnvironmentTest, DoesNotExpandValuesFromReferences) {
  references_.AddSecret("jobs", "creds", {{"token", "$(X)"}});
  Json container = {
      {"name", "main"},
      {"env",
       Json::array({{{"name", "X"}, {"value", "x"}},
                    {{"name", "T"},
                     {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}}})}};
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_EQ((*environment)[1], (EnvVar{"T", "$(X)"}));
}

TEST_F(ContainerEnvironmentTest, DecodesBase64SecretData) {
  references_.AddSecret("jobs", "creds", {{"token", std::string("s3cr\0t", 6)}});
  Result<std::string> value = ValueFrom({{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}});
  ASSERT_TRUE(value.ok()) << value.error().ToString();
  EXPECT_EQ(*value, std::string("s3cr\0t", 6));
}

TEST_F(ContainerEnvironmentTest, RefusesSecretDataThatIsNotBase64) {
  references_.SetRawSecret("jobs", "creds", {{"data", {{"token", "not base64!"}}}});
  Result<std::string> value = ValueFrom({{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(value.error().message, HasSubstr("not valid base64"));
}

TEST_F(ContainerEnvironmentTest, AMissingSecretIsAFailedPreconditionNamingTheEnvField) {
  Json container = {
      {"name", "main"},
      {"env",
       Json::array({{{"name", "A"}, {"value", "a"}},
                    {{"name", "B"}, {"value", "b"}},
                    {{"name", "T"},
                     {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}}})}};
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_FALSE(environment.ok());
  EXPECT_EQ(environment.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(environment.error().field, "spec.containers[0].env[2].valueFrom.secretKeyRef");
  EXPECT_THAT(environment.error().message, HasSubstr("Secret jobs/creds does not exist"));
  EXPECT_THAT(environment.error().message, HasSubstr("optional"));
}

TEST_F(ContainerEnvironmentTest, AMissingKeyIsAFailedPreconditionUnlessOptional) {
  references_.AddSecret("jobs", "creds", {{"user", "u"}});
  Result<std::string> required =
      ValueFrom({{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}});
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.error().code, ErrorCode::kFailedPrecondition);
  EXPECT_THAT(required.error().message, HasSubstr("has no key \"token\""));

  Result<std::string> optional =
      ValueFrom({{"secretKeyRef", {{"name", "creds"}, {"key", "token"}, {"optional", true}}}});
  ASSERT_FALSE(optional.ok());
  EXPECT_EQ(optional.error().code, ErrorCode::kNotFound)
      << "an optional missing key leaves the variable unset";
}

TEST_F(ContainerEnvironmentTest, AMissingOptionalObjectLeavesTheVariableUnset) {
  Result<std::string> value =
      ValueFrom({{"configMapKeyRef", {{"name", "absent"}, {"key", "k"}, {"optional", true}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kNotFound);
}

TEST_F(ContainerEnvironmentTest, ReadsAConfigMapKey) {
  references_.AddConfigMap("jobs", "settings", {{"level", "debug"}});
  Result<std::string> value =
      ValueFrom({{"configMapKeyRef", {{"name", "settings"}, {"key", "level"}}}});
  ASSERT_TRUE(value.ok()) << value.error().ToString();
  EXPECT_EQ(*value, "debug");
}

TEST_F(ContainerEnvironmentTest, KeepsTheCodeOfAReadFailureOtherThanNotFound) {
  references_.FailReadsWith(MakeError(ErrorCode::kUnavailable, "api server down"));
  Result<std::string> value =
      ValueFrom({{"configMapKeyRef", {{"name", "settings"}, {"key", "level"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(value.error().field, "spec.containers[0].env[0].valueFrom.configMapKeyRef");
}

TEST_F(ContainerEnvironmentTest, ResolvesFieldRefsOfThePod) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"metadata.name", "trainer-0"},     {"metadata.namespace", "jobs"},
      {"metadata.uid", "uid-123"},        {"metadata.labels['app']", "trainer"},
      {"metadata.labels['missing']", ""}, {"metadata.annotations['fulcrum.dev/slot']", "3"},
      {"spec.nodeName", "gpu-node-1"},    {"spec.serviceAccountName", "trainer-sa"},
      {"status.podIP", "10.1.0.7"},       {"status.podIPs", "10.1.0.7"},
      {"status.hostIP", "192.168.0.2"},   {"status.hostIPs", "192.168.0.2"},
  };
  for (const auto& [path, value] : expected) {
    Result<std::string> resolved =
        ValueFrom({{"fieldRef", {{"apiVersion", "v1"}, {"fieldPath", path}}}});
    ASSERT_TRUE(resolved.ok()) << path << ": " << resolved.error().ToString();
    EXPECT_EQ(*resolved, value) << path;
  }
}

TEST_F(ContainerEnvironmentTest, RefusesAnUnknownFieldPathNamingTheField) {
  Result<std::string> value = ValueFrom({{"fieldRef", {{"fieldPath", "status.phase"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(value.error().field, "spec.containers[0].env[0].valueFrom.fieldRef");
  EXPECT_THAT(value.error().message, HasSubstr("status.phase"));
}

TEST_F(ContainerEnvironmentTest, RefusesWholeLabelMapsInEnv) {
  Result<std::string> value = ValueFrom({{"fieldRef", {{"fieldPath", "metadata.labels"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(value.error().message, HasSubstr("metadata.labels['<key>']"));
}

TEST(ResolveFieldRef, FormatsWholeMapsAsSortedQuotedLinesWhenAllowed) {
  Json pod = {{"metadata", {{"labels", {{"b", "2"}, {"a", "say \"hi\"\n"}}}}}};
  Result<std::string> labels =
      ResolveFieldRef(pod, "metadata.labels", kEnvironmentFacts, true, "f");
  ASSERT_TRUE(labels.ok()) << labels.error().ToString();
  EXPECT_EQ(*labels, "a=\"say \\\"hi\\\"\\n\"\nb=\"2\"");
}

TEST(ResolveFieldRef, RefusesASubscriptOnAFieldThatIsNotAMap) {
  Result<std::string> value =
      ResolveFieldRef(Json::object(), "metadata.name['x']", kEnvironmentFacts, true, "the.field");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(value.error().field, "the.field");
}

TEST_F(ContainerEnvironmentTest, ResolvesCpuResourceFieldRefsRoundedUpToTheDivisor) {
  const Json resources = {{"limits", {{"cpu", "1500m"}, {"memory", "1Gi"}}},
                          {"requests", {{"cpu", "250m"}, {"memory", "128Mi"}}}};
  EXPECT_EQ(Text(ValueFrom({{"resourceFieldRef", {{"resource", "limits.cpu"}}}}, resources)), "2");
  EXPECT_EQ(Text(ValueFrom({{"resourceFieldRef", {{"resource", "limits.cpu"}, {"divisor", "1m"}}}},
                           resources)),
            "1500");
  EXPECT_EQ(Text(ValueFrom({{"resourceFieldRef", {{"resource", "requests.cpu"}, {"divisor", "0"}}}},
                           resources)),
            "1");
  EXPECT_EQ(
      Text(ValueFrom({{"resourceFieldRef", {{"resource", "requests.cpu"}, {"divisor", "100m"}}}},
                     resources)),
      "3");
}

TEST_F(ContainerEnvironmentTest, ResolvesMemoryResourceFieldRefsInBytesOrDivisorUnits) {
  const Json resources = {{"limits", {{"memory", "1Gi"}}}, {"requests", {{"memory", "128Mi"}}}};
  EXPECT_EQ(Text(ValueFrom({{"resourceFieldRef", {{"resource", "limits.memory"}}}}, resources)),
            "1073741824");
  EXPECT_EQ(
      Text(ValueFrom({{"resourceFieldRef", {{"resource", "requests.memory"}, {"divisor", "1Mi"}}}},
                     resources)),
      "128");
  EXPECT_EQ(
      Text(ValueFrom({{"resourceFieldRef", {{"resource", "requests.memory"}, {"divisor", "1G"}}}},
                     resources)),
      "1");
}

TEST_F(ContainerEnvironmentTest, AResourceFieldRefToAnUnsetResourceAsksToSetIt) {
  Result<std::string> value = ValueFrom({{"resourceFieldRef", {{"resource", "limits.cpu"}}}},
                                        {{"requests", {{"cpu", "1"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(value.error().field, "spec.containers[0].env[0].valueFrom.resourceFieldRef");
  EXPECT_THAT(value.error().message, HasSubstr("set resources.limits.cpu"));
}

TEST_F(ContainerEnvironmentTest, RefusesAnUnsupportedResource) {
  Result<std::string> value =
      ValueFrom({{"resourceFieldRef", {{"resource", "limits.ephemeral-storage"}}}},
                {{"limits", {{"ephemeral-storage", "1Gi"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_THAT(value.error().message, HasSubstr("limits.ephemeral-storage"));
}

TEST_F(ContainerEnvironmentTest, RefusesAValueFromSourceItDoesNotKnow) {
  Result<std::string> value = ValueFrom({{"fileKeyRef", {{"path", "x"}, {"key", "k"}}}});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(value.error().field, "spec.containers[0].env[0].valueFrom");
}

TEST_F(ContainerEnvironmentTest, ALiteralValueWinsOverValueFromAndAnEmptyOneIsSet) {
  Json container = {
      {"name", "main"},
      {"env", Json::array({{{"name", "A"},
                            {"value", "lit"},
                            {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                           {{"name", "E"}}})}};
  Result<std::vector<EnvVar>> environment = Build(container);
  ASSERT_TRUE(environment.ok()) << environment.error().ToString();
  EXPECT_THAT(*environment, ElementsAre(EnvVar{"A", "lit"}, EnvVar{"E", ""}));
}

TEST(ExpandCommandAndArgs, ExpandsCommandAndArgsAgainstTheFinalEnvironment) {
  Json container = {{"command", {"$(BIN)", "$$(BIN)"}},
                    {"args", {"--rank=$(RANK)", "$(UNSET)", "$RANK"}}};
  CommandLine line = ExpandCommandAndArgs(container, {{"BIN", "/bin/train"}, {"RANK", "3"}});
  EXPECT_THAT(line.command, ElementsAre("/bin/train", "$(BIN)"));
  EXPECT_THAT(line.args, ElementsAre("--rank=3", "$(UNSET)", "$RANK"));
}

TEST(ExpandCommandAndArgs, LeavesCommandEmptyWhenTheContainerSetsNone) {
  CommandLine line = ExpandCommandAndArgs(Json{{"args", {"x"}}}, {});
  EXPECT_TRUE(line.command.empty());
  EXPECT_THAT(line.args, ElementsAre("x"));
}

}  // namespace
}  // namespace fulcrum::local_node
