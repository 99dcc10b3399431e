// fulcrum-coordinator's command line: required flags and errors that name the flag.
#include "operator/cmd/fulcrum_coordinator/coordinator_flags.h"

#include <gtest/gtest.h>

namespace fulcrum::coordinator {
namespace {

TEST(CoordinatorFlags, ParsesAValidCommandLine) {
  auto flags = ParseCoordinatorFlags(
      {"--listen", "127.0.0.1:0", "--job-token-file", "t", "--global-batch", "64", "--policy",
       "proportional", "--min-workers", "3", "--tls-cert", "tls.crt", "--tls-key", "tls.key"});
  ASSERT_TRUE(flags.ok()) << flags.error().ToString();
  EXPECT_EQ(flags->job_template.global_batch, 64);
  EXPECT_EQ(flags->job_template.min_workers, 3);
  EXPECT_EQ(flags->job_template.policy, balancer::PolicyKind::kProportional);
  EXPECT_EQ(flags->tls_certificate_file, "tls.crt");
  EXPECT_FALSE(flags->insecure);
}

TEST(CoordinatorFlags, TakesThePlanLeadInMillisecondsAndRefusesANegativeOne) {
  const std::vector<std::string> base = {"--listen",       "x:1", "--job-token-file", "t",
                                         "--global-batch", "8",   "--insecure",       "true"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return ParseCoordinatorFlags(more);
  };
  EXPECT_DOUBLE_EQ(with({})->job_template.apply_lead_seconds, 0.03);
  EXPECT_DOUBLE_EQ(with({"--apply-lead-ms", "50"})->job_template.apply_lead_seconds, 0.05);
  EXPECT_EQ(with({"--apply-lead-ms", "-5"}).error().field, "--apply-lead-ms");
}

TEST(CoordinatorFlags, ServesTlsOrPlaintextOnlyWhenAskedByName) {
  const std::vector<std::string> base = {"--listen",       "x:1", "--job-token-file", "t",
                                         "--global-batch", "8"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return ParseCoordinatorFlags(more);
  };
  EXPECT_EQ(with({}).error().field, "--tls-cert");
  EXPECT_TRUE(with({"--insecure", "true"})->insecure);
  EXPECT_EQ(with({"--tls-cert", "c"}).error().field, "--tls-key");
  EXPECT_EQ(with({"--tls-cert", "c", "--tls-key", "k", "--insecure", "true"}).error().field,
            "--tls-cert");
}

TEST(CoordinatorFlags, NamesTheFlagThatIsWrong) {
  EXPECT_EQ(ParseCoordinatorFlags({"--job-token-file", "t", "--global-batch", "8"}).error().field,
            "--listen");
  EXPECT_EQ(ParseCoordinatorFlags({"--listen", "x:1", "--job-token-file", "t"}).error().field,
            "--global-batch");
  EXPECT_EQ(ParseCoordinatorFlags({"--listen", "x:1", "--job-token-file", "t", "--global-batch",
                                   "8", "--policy", "fastest"})
                .error()
                .field,
            "--policy");
  EXPECT_EQ(ParseCoordinatorFlags({"--listen", "x:1", "--job-token-file", "t", "--global-batch",
                                   "8", "--min-gain", "2", "--insecure", "true"})
                .error()
                .field,
            "--min_gain");
  EXPECT_EQ(ParseCoordinatorFlags({"--nope", "1"}).error().field, "--nope");
}

}  // namespace
}  // namespace fulcrum::coordinator
