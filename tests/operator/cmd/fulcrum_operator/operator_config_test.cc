#include "operator/cmd/fulcrum_operator/operator_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/support/temporary_directory.h"

namespace fulcrum::operator_main {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kRequired = {"--coordinator-address", "fulcrum.svc:7070",
                                            "--coordinator-tls-secret",
                                            "fulcrum-system/fulcrum-coordinator-tls"};

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> args = kRequired;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

class OperatorConfigFile : public ::testing::Test {
 protected:
  std::string Write(const std::string& yaml) {
    const std::string path = (directory_.path() / "operator.yaml").string();
    std::ofstream(path) << yaml;
    return path;
  }
  fulcrum::testing::TemporaryDirectory directory_{"operator-config"};
};

TEST(OperatorConfig, DefaultsAreSaneAndTheHostNameIsTheIdentity) {
  const Result<OperatorConfig> config = ParseOperatorConfig(kRequired, "operator-7f9c");
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_TRUE(config->leader_election.enabled);
  EXPECT_EQ(config->leader_election.identity, "operator-7f9c");
  EXPECT_EQ(config->leader_election.lease_duration, std::chrono::seconds(15));
  EXPECT_EQ(config->gpu_labels.product, "nvidia.com/gpu.product");
  EXPECT_EQ(config->coordinator_listen, "0.0.0.0:7070");
  EXPECT_EQ(config->workers, 2);
  // At most one progress-only status write per job per 5 s: the operator-at-scale goal.
  EXPECT_EQ(config->status_min_interval, std::chrono::seconds(5));
  EXPECT_EQ(config->coordinator_limits.hello_timeout, std::chrono::seconds(10));
  EXPECT_EQ(config->coordinator_limits.max_streams, 4096);
}

TEST(OperatorConfig, TheCoordinatorServesTlsFromASecretOrPlaintextOnlyWhenToldSo) {
  const Result<OperatorConfig> tls = ParseOperatorConfig(kRequired, "h");
  ASSERT_TRUE(tls.ok()) << tls.error().ToString();
  EXPECT_EQ(tls->coordinator_tls_secret, "fulcrum-system/fulcrum-coordinator-tls");
  EXPECT_FALSE(tls->coordinator_insecure);
  const Result<OperatorConfig> plaintext = ParseOperatorConfig(
      {"--coordinator-address", "h:7070", "--coordinator-insecure", "true"}, "h");
  ASSERT_TRUE(plaintext.ok()) << plaintext.error().ToString();
  EXPECT_TRUE(plaintext->coordinator_insecure);
  const Error neither = ParseOperatorConfig({"--coordinator-address", "h:7070"}, "h").error();
  EXPECT_EQ(neither.field, "--coordinator-tls-secret / coordinator.tlsSecret");
  EXPECT_THAT(neither.message, HasSubstr("coordinator.insecure"));
  EXPECT_THAT(ParseOperatorConfig(With({"--coordinator-insecure", "true"}), "h").error().message,
              HasSubstr("exclude each other"));
  EXPECT_EQ(ParseOperatorConfig(
                {"--coordinator-address", "h:7070", "--coordinator-tls-secret", "no-slash"}, "h")
                .error()
                .field,
            "--coordinator-tls-secret / coordinator.tlsSecret");
}

TEST(OperatorConfig, TheCoordinatorsLimitsAreSetByFlagsAndCheckedByName) {
  const Result<OperatorConfig> config = ParseOperatorConfig(
      With({"--coordinator-hello-timeout", "2s", "--coordinator-max-streams", "64",
            "--coordinator-max-streams-per-job", "8", "--coordinator-max-queued-messages", "32"}),
      "h");
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->coordinator_limits.hello_timeout, std::chrono::seconds(2));
  EXPECT_EQ(config->coordinator_limits.max_streams, 64);
  EXPECT_EQ(config->coordinator_limits.max_streams_per_job, 8);
  EXPECT_EQ(config->coordinator_limits.max_queued_messages, 32u);
  for (const char* flag : {"--coordinator-max-streams", "--coordinator-max-streams-per-job",
                           "--coordinator-max-queued-messages"}) {
    const Result<OperatorConfig> refused = ParseOperatorConfig(With({flag, "0"}), "h");
    ASSERT_FALSE(refused.ok()) << flag;
    EXPECT_THAT(refused.error().field, HasSubstr(flag));
    EXPECT_THAT(refused.error().message, HasSubstr("whole number in 1.."));
  }
  EXPECT_THAT(ParseOperatorConfig(With({"--coordinator-hello-timeout", "0s"}), "h").error().field,
              HasSubstr("--coordinator-hello-timeout"));
}

TEST(OperatorConfig, TheCoordinatorServiceNeedsNamespaceSlashNameAndThisReplicasIp) {
  const Result<OperatorConfig> good =
      ParseOperatorConfig(With({"--coordinator-service", "fulcrum-system/fulcrum-coordinator",
                                "--coordinator-advertise-ip", "10.0.3.9"}),
                          "h");
  ASSERT_TRUE(good.ok()) << good.error().ToString();
  EXPECT_EQ(good->coordinator_service, "fulcrum-system/fulcrum-coordinator");
  EXPECT_TRUE(
      ParseOperatorConfig(
          With({"--coordinator-service", "ns/svc", "--coordinator-advertise-ip", "fd00::9"}), "h")
          .ok());
  for (const char* bad : {"fulcrum-coordinator", "ns/", "/svc", "Ns/svc", "a/b/c"}) {
    const Result<OperatorConfig> refused = ParseOperatorConfig(
        With({"--coordinator-service", bad, "--coordinator-advertise-ip", "10.0.3.9"}), "h");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().field, "--coordinator-service / coordinator.service") << bad;
  }
  // Without the pod IP there is nothing to point the Service at.
  for (const char* bad : {"", "$(POD_IP)", "10.0.3"}) {
    const Result<OperatorConfig> refused = ParseOperatorConfig(
        With({"--coordinator-service", "ns/svc", "--coordinator-advertise-ip", bad}), "h");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().field, "--coordinator-advertise-ip / coordinator.advertiseIP");
    EXPECT_THAT(refused.error().message, HasSubstr("pod IP"));
  }
  // Kubernetes refuses loopback endpoints; fulcrum-local-node's pods have 127.x addresses.
  for (const char* loopback : {"127.0.0.1", "127.77.3.4", "::1"}) {
    const Result<OperatorConfig> refused = ParseOperatorConfig(
        With({"--coordinator-service", "ns/svc", "--coordinator-advertise-ip", loopback}), "h");
    ASSERT_FALSE(refused.ok()) << loopback;
    EXPECT_THAT(refused.error().message, HasSubstr("loopback")) << loopback;
  }
}

TEST(OperatorConfig, TheApiRequestLimitStartsTwoHundredJobsInAMinuteAndIsChecked) {
  const Result<OperatorConfig> defaults = ParseOperatorConfig(kRequired, "h");
  ASSERT_TRUE(defaults.ok()) << defaults.error().ToString();
  // About 15 requests start a job: 200 jobs in 60 s need 50 a second.
  EXPECT_GE(defaults->kube_api_qps, 50.0);
  EXPECT_GE(defaults->kube_api_burst, defaults->kube_api_qps);
  const Result<OperatorConfig> set =
      ParseOperatorConfig(With({"--kube-api-qps", "12.5", "--kube-api-burst", "40"}), "h");
  ASSERT_TRUE(set.ok()) << set.error().ToString();
  EXPECT_EQ(set->kube_api_qps, 12.5);
  EXPECT_EQ(set->kube_api_burst, 40);
  for (const char* bad : {"0", "-3", "fast", "1e9", "nan"}) {
    const Result<OperatorConfig> refused = ParseOperatorConfig(With({"--kube-api-qps", bad}), "h");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().field, "--kube-api-qps") << bad;
    EXPECT_THAT(refused.error().message, HasSubstr("requests per second")) << bad;
  }
  EXPECT_EQ(ParseOperatorConfig(With({"--kube-api-burst", "0"}), "h").error().field,
            "--kube-api-burst");
}

TEST(OperatorConfig, FlagsErrorsNameTheFlag) {
  const Error missing = ParseOperatorConfig({}, "h").error();
  EXPECT_EQ(missing.field, "--coordinator-address / coordinator.address");
  EXPECT_THAT(missing.message, HasSubstr("HOST:PORT"));
  EXPECT_EQ(ParseOperatorConfig(With({"--leader-elect-lease-duration", "soon"}), "h").error().field,
            "--leader-elect-lease-duration");
  EXPECT_EQ(ParseOperatorConfig(With({"--workers", "0"}), "h").error().field, "--workers");
  EXPECT_EQ(ParseOperatorConfig(With({"--leader-elect", "yes"}), "h").error().field,
            "--leader-elect");
  EXPECT_EQ(ParseOperatorConfig(With({"--metrics-listen", "8080"}), "h").error().field,
            "--metrics-listen / metrics.listen");
  // Port 0 (any free port) is for listening, not for the address trainers dial.
  EXPECT_TRUE(ParseOperatorConfig(With({"--health-listen", "127.0.0.1:0"}), "h").ok());
  EXPECT_EQ(
      ParseOperatorConfig({"--coordinator-address", "h:0", "--coordinator-insecure", "true"}, "h")
          .error()
          .field,
      "--coordinator-address / coordinator.address");
  EXPECT_EQ(ParseOperatorConfig(With({"--no-such-flag", "1"}), "h").error().code,
            ErrorCode::kInvalidArgument);
  // A renew deadline at or above the lease could let two operators lead at once.
  EXPECT_EQ(ParseOperatorConfig(With({"--leader-elect-renew-deadline", "20s"}), "h").error().field,
            "--leader-elect-lease-duration / leaderElection.leaseDuration");
}

TEST_F(OperatorConfigFile, ReadsNestedKeysAndListsAndFlagsWin) {
  const std::string file = Write(R"(
coordinator:
  address: fulcrum-operator.fulcrum-system.svc:7070
  tlsSecret: fulcrum-system/fulcrum-coordinator-tls
leaderElection:
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
gpuLabels:
  product: amd.com/gpu.product-name
  resource: amd.com/gpu
toleratedTaintKeys: [amd.com/gpu, dedicated]
status:
  minInterval: 7s
workers: 4
kubeApi:
  qps: 80
  burst: 160
)");
  const Result<OperatorConfig> config =
      ParseOperatorConfig({"--config", file, "--workers", "8"}, "h");
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->coordinator_address, "fulcrum-operator.fulcrum-system.svc:7070");
  EXPECT_EQ(config->leader_election.lease_duration, std::chrono::seconds(30));
  EXPECT_EQ(config->leader_election.retry_period, std::chrono::seconds(4));
  EXPECT_EQ(config->gpu_labels.product, "amd.com/gpu.product-name");
  EXPECT_EQ(config->gpu_labels.resource, "amd.com/gpu");
  EXPECT_EQ(config->tolerated_taint_keys, (std::vector<std::string>{"amd.com/gpu", "dedicated"}));
  EXPECT_EQ(config->status_min_interval, std::chrono::seconds(7));
  EXPECT_EQ(config->workers, 8);  // the flag wins over the file's 4
  EXPECT_EQ(config->kube_api_qps, 80.0);
  EXPECT_EQ(config->kube_api_burst, 160);
}

TEST_F(OperatorConfigFile, ErrorsNameTheFileAndTheKey) {
  const std::string unknown = Write("coordinator:\n  adress: x:1\n");
  const Error typo = ParseOperatorConfig({"--config", unknown}, "h").error();
  EXPECT_THAT(typo.field, HasSubstr("coordinator.adress"));
  EXPECT_THAT(typo.message, HasSubstr("coordinator.address"));  // the known keys are listed
  const std::string bad_value = Write("leaderElection:\n  retryPeriod: often\n");
  EXPECT_THAT(ParseOperatorConfig(With({"--config", bad_value}), "h").error().field,
              HasSubstr("leaderElection.retryPeriod"));
  const std::string broken = Write("coordinator: [unclosed\n");
  EXPECT_EQ(ParseOperatorConfig({"--config", broken}, "h").error().field, "--config");
  EXPECT_EQ(ParseOperatorConfig({"--config", "/no/such/file.yaml"}, "h").error().field, "--config");
}

}  // namespace
}  // namespace fulcrum::operator_main
