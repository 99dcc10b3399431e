#include "operator/kube/config/kubeconfig.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "tests/support/temporary_directory.h"

namespace fulcrum::kube {
namespace {

namespace fs = std::filesystem;

class KubeconfigTest : public ::testing::Test {
 protected:
  fs::path Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path;
  }

  fulcrum::testing::TemporaryDirectory temp_{"kubeconfig-test"};
  const fs::path dir_ = temp_.path();
};

constexpr const char* kTwoContexts = R"(apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "https://127.0.0.1:6443/", certificate-authority: ca.pem, tls-server-name: kubernetes}
users:
- name: alice
  user: {token: secret-token}
- name: robot
  user: {tokenFile: token.txt}
contexts:
- name: alice-ctx
  context: {cluster: local, user: alice, namespace: training}
- name: robot-ctx
  context: {cluster: local, user: robot}
current-context: alice-ctx
)";

TEST_F(KubeconfigTest, ReadsCurrentContextAndResolvesRelativeFilesAgainstItsFolder) {
  Write("ca.pem", "-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n");
  const auto config = LoadKubeconfig(Write("config", kTwoContexts));
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(config->bearer_token, "secret-token");
  EXPECT_EQ(config->default_namespace, "training");
  EXPECT_EQ(config->tls_server_name, "kubernetes");
  EXPECT_NE(config->ca_pem.find("BEGIN CERTIFICATE"), std::string::npos);
}

TEST_F(KubeconfigTest, ExplicitContextSelectsTokenFileUser) {
  Write("ca.pem", "-----BEGIN CERTIFICATE-----\n");
  Write("token.txt", "rotating-token\n");
  const auto config = LoadKubeconfig(Write("config", kTwoContexts), "robot-ctx");
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->bearer_token, "rotating-token");
  EXPECT_EQ(config->bearer_token_file, dir_ / "token.txt");
  EXPECT_EQ(config->default_namespace, "default");
}

TEST_F(KubeconfigTest, UnknownContextListsTheOnesThatExist) {
  const auto config = LoadKubeconfig(Write("config", kTwoContexts), "prod");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "contexts");
  EXPECT_NE(config.error().message.find("no context named 'prod' (have: alice-ctx, robot-ctx)"),
            std::string::npos)
      << config.error().message;
}

TEST_F(KubeconfigTest, MissingFileSaysHowToPointAtOne) {
  const auto config = LoadKubeconfig(dir_ / "absent");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().code, ErrorCode::kNotFound);
  EXPECT_NE(config.error().message.find("--kubeconfig"), std::string::npos);
}

TEST_F(KubeconfigTest, MissingCaFileNamesTheField) {
  const auto config = LoadKubeconfig(Write("config", kTwoContexts));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "clusters[local].cluster.certificate-authority");
}

TEST_F(KubeconfigTest, ServerThatIsNotAUrlNamesTheField) {
  const auto config = LoadKubeconfig(Write("config", R"(
clusters: [{name: c, cluster: {server: "127.0.0.1:6443"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "clusters[c].cluster.server");
}

TEST_F(KubeconfigTest, ClientCertificateWithoutKeyIsRejected) {
  const auto config = LoadKubeconfig(Write("config", R"(
clusters: [{name: c, cluster: {server: "https://h:1", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {client-certificate-data: LS0tLS1CRUdJTg==}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "users[u].user.client-key");
}

TEST_F(KubeconfigTest, InlineCertificateDataIsDecodedFromBase64) {
  const auto config = LoadKubeconfig(Write("config", R"(
clusters: [{name: c, cluster: {server: "https://h:1", certificate-authority-data: UEVNIENB}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)"));
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->ca_pem, "PEM CA");
}

TEST_F(KubeconfigTest, InlineDataThatIsNotBase64NamesTheFieldAndTheFix) {
  const auto config = LoadKubeconfig(Write("config", R"(
clusters: [{name: c, cluster: {server: "https://h:1", certificate-authority-data: "not base64!"}}]
contexts: [{name: x, context: {cluster: c}}]
current-context: x
)"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "clusters[c].cluster.certificate-authority-data");
  EXPECT_NE(config.error().message.find("base64 -w0"), std::string::npos) << config.error().message;
}

TEST_F(KubeconfigTest, ExecPluginsAreRefusedByName) {
  const auto config = LoadKubeconfig(Write("config", R"(
clusters: [{name: c, cluster: {server: "https://h:1"}}]
users: [{name: u, user: {exec: {command: aws}}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
)"));
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.error().field, "users[u].user.exec");
}

TEST_F(KubeconfigTest, MalformedYamlIsReportedAsSuch) {
  const auto config = LoadKubeconfig(Write("config", "clusters: [unclosed\n"));
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("not valid YAML"), std::string::npos);
}

TEST_F(KubeconfigTest, TextParsesAsTheFileWouldAndNeverThrows) {
  std::ofstream(dir_ / "ca.pem") << "CA";
  const auto from_file = LoadKubeconfig(Write("config", kTwoContexts));
  const auto from_text = ParseKubeconfigText(kTwoContexts, dir_ / "config");
  ASSERT_TRUE(from_file.ok()) << from_file.error().ToString();
  ASSERT_TRUE(from_text.ok()) << from_text.error().ToString();
  EXPECT_EQ(from_text->server, from_file->server);
  EXPECT_EQ(from_text->ca_pem, "CA");
  // Shapes a user may write by mistake (kubeconfig_fuzz): errors, not exceptions.
  for (const char* text : {"", "- a list", "clusters: {a: b}\ncurrent-context: [x]",
                           "current-context: c\ncontexts: [{name: c, context: [1]}]",
                           "current-context: c\ncontexts: [{name: c, context: {cluster: {}}}]"}) {
    EXPECT_FALSE(ParseKubeconfigText(text, dir_ / "config").ok()) << text;
  }
}

TEST_F(KubeconfigTest, InClusterConfigUsesServiceAccountFilesAndEnvironment) {
  InClusterPaths paths{Write("token", "sa-token\n"), Write("ca.crt", "PEM"),
                       Write("namespace", "fulcrum-system")};
  const std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.0.0.1"},
                                                  {"KUBERNETES_SERVICE_PORT", "443"}};
  const auto lookup = [&](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
  const auto config = LoadInClusterConfig(lookup, paths);
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->server, "https://10.0.0.1:443");
  EXPECT_EQ(config->bearer_token, "sa-token");
  EXPECT_EQ(config->default_namespace, "fulcrum-system");
}

TEST_F(KubeconfigTest, InClusterConfigOutsideAClusterSaysWhichVariablesAreMissing) {
  const auto config = LoadInClusterConfig([](std::string_view) { return std::nullopt; });
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::kube
