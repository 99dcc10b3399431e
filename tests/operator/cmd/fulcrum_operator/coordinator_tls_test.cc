// What the operator takes from the coordinator's TLS Secret: its own (with the CA's key, so it
// can reissue the serving certificate) or one an issuer such as cert-manager keeps (no CA key:
// used as it is, or refused with the reason).
#include "operator/cmd/fulcrum_operator/coordinator_tls.h"

#include <absl/strings/escaping.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fulcrum::operator_main {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

nlohmann::json SecretWith(const std::map<std::string, std::string>& data) {
  nlohmann::json secret = {{"metadata", {{"namespace", "fulcrum-system"}, {"name", "tls"}}},
                           {"data", nlohmann::json::object()}};
  for (const auto& [key, value] : data) secret["data"][key] = absl::Base64Escape(value);
  return secret;
}

class StoredCoordinatorTlsTest : public ::testing::Test {
 protected:
  const coordinator::PemKeyPair ca_ =
      coordinator::MakeCertificateAuthority("ca", 24h * 3650).value();
  const coordinator::PemKeyPair serving_ =
      coordinator::IssueServingCertificate(ca_, {"coordinator.fulcrum-system.svc"}, 24h * 365)
          .value();
};

TEST_F(StoredCoordinatorTlsTest, ACertificateThatNamesTheHostIsServedAsItIs) {
  for (bool made_here : {true, false}) {
    std::map<std::string, std::string> data = {{"ca.crt", ca_.certificate},
                                               {"tls.crt", serving_.certificate},
                                               {"tls.key", serving_.private_key}};
    if (made_here) data["ca.key"] = ca_.private_key;
    const auto stored = StoredCoordinatorTls(SecretWith(data), {"coordinator.fulcrum-system.svc"});
    ASSERT_TRUE(stored.ok()) << stored.error().ToString();
    ASSERT_TRUE(stored->has_value());
    EXPECT_EQ((*stored)->serving.certificate, serving_.certificate);
    EXPECT_EQ((*stored)->ca_certificate, ca_.certificate);
  }
}

TEST_F(StoredCoordinatorTlsTest, ANewHostIsReissuedFromOurCaButRefusedForAnIssuersSecret) {
  std::map<std::string, std::string> data = {{"ca.crt", ca_.certificate},
                                             {"tls.crt", serving_.certificate},
                                             {"tls.key", serving_.private_key}};
  const std::vector<std::string> moved = {"coordinator.other.svc"};
  EXPECT_EQ(StoredCoordinatorTls(SecretWith(data), moved).error().field, "coordinator.tlsSecret");
  EXPECT_THAT(StoredCoordinatorTls(SecretWith(data), moved).error().message,
              HasSubstr("managed elsewhere"));
  data["ca.key"] = ca_.private_key;
  const auto ours = StoredCoordinatorTls(SecretWith(data), moved);
  ASSERT_TRUE(ours.ok());
  EXPECT_FALSE(ours->has_value()) << "reissue";
}

TEST_F(StoredCoordinatorTlsTest, ASecretWithoutItsKeysIsRefusedNamingThem) {
  const auto refused = StoredCoordinatorTls(SecretWith({{"tls.crt", serving_.certificate}}),
                                            {"coordinator.fulcrum-system.svc"});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().message, HasSubstr("needs ca.crt, tls.crt and tls.key"));
}

}  // namespace
}  // namespace fulcrum::operator_main
