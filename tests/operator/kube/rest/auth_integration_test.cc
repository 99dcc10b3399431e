// Authentication and trust against the real API server: token and client
// certificate kubeconfigs, token-file rotation, tls-server-name, a wrong CA,
// and kubeconfig mistakes reported by field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/operator/kube/kube_test_support.h"
#include "tests/support/temporary_directory.h"

namespace fulcrum::kube {
namespace {

namespace fs = std::filesystem;
using fulcrum::testing::Cluster;
using fulcrum::testing::RunShell;
using fulcrum::testing::ShellQuote;

class KubeAuth : public ::testing::Test {
 protected:
  fs::path Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  static std::string TokenOf(const std::string& kubeconfig) {
    auto config = LoadKubeconfig(kubeconfig);
    EXPECT_TRUE(config.ok());
    return config.ok() ? config->bearer_token : "";
  }
  // A kubeconfig for the test cluster with the given cluster and user fields.
  fs::path Kubeconfig(const std::string& name, const std::string& cluster_fields,
                      const std::string& user_fields) {
    return Write(
        name, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n" + cluster_fields +
                  "users:\n- name: u\n  user:\n" + user_fields +
                  "contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n");
  }
  std::string Server() const { return "    server: " + Cluster().Get("FULCRUM_APISERVER") + "\n"; }
  std::string TrustedCa() const {
    return "    certificate-authority: " + Cluster().Get("FULCRUM_CA_FILE") + "\n";
  }

  fulcrum::testing::TemporaryDirectory temp_{"kube-auth"};
  const fs::path dir_ = temp_.path();
};

TEST_F(KubeAuth, TokenAndClientCertificateKubeconfigsBothWork) {
  for (const std::string& kubeconfig :
       {Cluster().Get("FULCRUM_TOKEN_KUBECONFIG"), Cluster().kubeconfig()}) {
    auto client = testing::ClientFor(kubeconfig);
    ASSERT_NE(client, nullptr);
    auto listed = client->List(resources::Nodes(), "");
    ASSERT_TRUE(listed.ok()) << kubeconfig << ": " << listed.error().ToString();
    EXPECT_GE(listed->items.size(), 8u);
  }
  // Client certificate and key given as files rather than inline data.
  const fs::path pki = fs::path(Cluster().dir) / "pki";
  auto client = testing::ClientFor(
      Kubeconfig("cert-files", Server() + TrustedCa(),
                 "    client-certificate: " + (pki / "admin.crt").string() +
                     "\n    client-key: " + (pki / "admin.key").string() + "\n"));
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->Get(resources::Namespaces(), "", "default").ok());
}

TEST_F(KubeAuth, TokenFileIsReReadWhenItRotates) {
  const fs::path token_file =
      Write("token", TokenOf(Cluster().Get("FULCRUM_TOKEN_KUBECONFIG")) + "\n");
  auto client = testing::ClientFor(Kubeconfig("rotating", Server() + TrustedCa(),
                                              "    tokenFile: " + token_file.string() + "\n"));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->List(resources::Pods(), "default").ok());

  // Rotate to the token of a user without rights; the next request uses it.
  Write("token", TokenOf(Cluster().Get("FULCRUM_NOBODY_KUBECONFIG")) + "\n");
  fs::last_write_time(token_file, fs::last_write_time(token_file) + std::chrono::seconds(2));
  auto denied = client->List(resources::Pods(), "default");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.error().code, ErrorCode::kPermissionDenied) << denied.error().ToString();
}

TEST_F(KubeAuth, TlsServerNameIsTheNameTheCertificateIsCheckedAgainst) {
  const std::string token =
      "    token: " + TokenOf(Cluster().Get("FULCRUM_TOKEN_KUBECONFIG")) + "\n";
  auto good = testing::ClientFor(Kubeconfig(
      "sni-good", Server() + TrustedCa() + "    tls-server-name: kubernetes.default.svc\n", token));
  ASSERT_NE(good, nullptr);
  EXPECT_TRUE(good->Get(resources::Namespaces(), "", "default").ok());

  auto bad = testing::ClientFor(Kubeconfig(
      "sni-bad", Server() + TrustedCa() + "    tls-server-name: not-the-apiserver.example\n",
      token));
  ASSERT_NE(bad, nullptr);
  auto refused = bad->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("TLS"), std::string::npos) << refused.error().ToString();
}

TEST_F(KubeAuth, WrongCaFailsWithAClearTlsError) {
  const auto made = RunShell(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=some-other-ca -keyout " +
      ShellQuote((dir_ / "other.key").string()) + " -out " +
      ShellQuote((dir_ / "other.crt").string()) + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto client = testing::ClientFor(Kubeconfig(
      "wrong-ca", Server() + "    certificate-authority: " + (dir_ / "other.crt").string() + "\n",
      "    token: " + TokenOf(Cluster().Get("FULCRUM_TOKEN_KUBECONFIG")) + "\n"));
  ASSERT_NE(client, nullptr);
  auto refused = client->Get(resources::Namespaces(), "", "default");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  const std::string& message = refused.error().message;
  std::printf("wrong CA: %s\n", message.c_str());
  EXPECT_NE(message.find("TLS handshake failed"), std::string::npos) << message;
  EXPECT_NE(message.find("certificate-authority"), std::string::npos) << message;
  EXPECT_NE(message.find("wrong-ca"), std::string::npos) << "must name the kubeconfig: " << message;
}

TEST_F(KubeAuth, KubeconfigMistakesNameTheField) {
  struct Case {
    std::string cluster_fields, user_fields, field;
  };
  const std::vector<Case> cases = {
      {TrustedCa(), "    token: t\n", "clusters[c].cluster.server"},
      {Server() + "    certificate-authority-data: '!!not base64!!'\n", "    token: t\n",
       "clusters[c].cluster.certificate-authority-data"},
      {Server() + "    certificate-authority: /nonexistent/ca.crt\n", "    token: t\n",
       "clusters[c].cluster.certificate-authority"},
      {Server() + TrustedCa(), "    client-certificate: /nonexistent/admin.crt\n",
       "users[u].user.client-certificate"},
      {Server() + TrustedCa(), "    tokenFile: /nonexistent/token\n", "users[u].user.tokenFile"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const fs::path file =
        Kubeconfig("broken-" + std::to_string(i), cases[i].cluster_fields, cases[i].user_fields);
    auto config = LoadKubeconfig(file);
    ASSERT_FALSE(config.ok()) << "case " << i << " loaded";
    EXPECT_EQ(config.error().field, cases[i].field) << config.error().ToString();
    EXPECT_NE(config.error().message.find(file.string()), std::string::npos)
        << config.error().ToString();
  }
  auto missing = LoadKubeconfig(dir_ / "does-not-exist");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("does-not-exist"), std::string::npos);
  auto no_context = LoadKubeconfig(Kubeconfig("ctx", Server(), "    token: t\n"), "nope");
  ASSERT_FALSE(no_context.ok());
  EXPECT_EQ(no_context.error().field, "contexts");
  EXPECT_NE(no_context.error().message.find("nope"), std::string::npos);
}

}  // namespace
}  // namespace fulcrum::kube
