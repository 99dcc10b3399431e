// The coordinator's certificate authority: what it issues is a CA and a serving certificate
// for exactly the names asked, in PEM that OpenSSL reads back.
#include "operator/coordinator/tls_certificates.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fulcrum::coordinator {
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TlsCertificates, AServingCertificateNamesExactlyTheHostsAskedAsDnsOrIpSans) {
  const Result<PemKeyPair> ca = MakeCertificateAuthority("fulcrum-coordinator-ca", 24h * 3650);
  ASSERT_TRUE(ca.ok()) << ca.error().ToString();
  EXPECT_THAT(ca->certificate, HasSubstr("-----BEGIN CERTIFICATE-----"));
  EXPECT_THAT(ca->private_key, HasSubstr("-----BEGIN PRIVATE KEY-----"));
  const Result<PemKeyPair> serving = IssueServingCertificate(
      *ca, {"fulcrum-coordinator.fulcrum-system.svc", "10.0.0.7", "fd00::7"}, 24h * 365);
  ASSERT_TRUE(serving.ok()) << serving.error().ToString();
  EXPECT_THAT(SubjectAltNames(serving->certificate).value(),
              ElementsAre("fulcrum-coordinator.fulcrum-system.svc", "10.0.0.7", "fd00::7"));
  EXPECT_TRUE(SubjectAltNames(ca->certificate).value().empty());
  EXPECT_NE(serving->private_key, ca->private_key);
}

TEST(TlsCertificates, ValidityIsCheckedAgainstAMarginToRenewInTime) {
  const PemKeyPair ca = MakeCertificateAuthority("ca", 24h * 3650).value();
  const PemKeyPair short_lived = IssueServingCertificate(ca, {"coordinator"}, 24h * 10).value();
  EXPECT_TRUE(ValidFor(short_lived.certificate, 24h).value());
  EXPECT_FALSE(ValidFor(short_lived.certificate, 24h * 30).value()) << "expires within 30 days";
}

TEST(TlsCertificates, BadInputIsRefusedWithTheField) {
  const PemKeyPair ca = MakeCertificateAuthority("ca", 24h).value();
  EXPECT_EQ(IssueServingCertificate(ca, {}, 24h).error().field, "hosts");
  EXPECT_EQ(IssueServingCertificate(ca, {"a,DNS:evil.example"}, 24h).error().field, "hosts");
  EXPECT_EQ(IssueServingCertificate({"not pem", ca.private_key}, {"a"}, 24h).error().field, "tls");
  EXPECT_FALSE(SubjectAltNames("garbage").ok());
}

}  // namespace
}  // namespace fulcrum::coordinator
