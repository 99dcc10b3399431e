#include "tests/trainer_image/harness/local_job.h"

#include <csignal>

#include "operator/coordinator/tls_certificates.h"

namespace fulcrum::testing {

std::string TrainerBinary() {
  return FULCRUM_TRAINER_BINARY;
}
std::string CoordinatorBinary() {
  return FULCRUM_COORDINATOR_BINARY;
}

LocalJob::LocalJob(const std::string& test_name, const std::vector<std::string>& coordinator_args)
    : directory_(FreshDirectory(test_name)), coordinator_args_(coordinator_args) {
  WriteFile(directory_ + "/tokens", std::string(kTestJob) + " " + kTestToken + "\n");
  WriteFile(directory_ + "/token", std::string(kTestToken) + "\n");
  // The coordinator serves TLS, as the operator's does; trainers verify it against this CA.
  using namespace std::chrono_literals;
  const coordinator::PemKeyPair ca =
      coordinator::MakeCertificateAuthority("local-job-ca", 24h).value();
  const coordinator::PemKeyPair serving =
      coordinator::IssueServingCertificate(ca, {"127.0.0.1"}, 24h).value();
  WriteFile(directory_ + "/ca.crt", ca.certificate);
  WriteFile(directory_ + "/tls.crt", serving.certificate);
  WriteFile(directory_ + "/tls.key", serving.private_key);
  StartCoordinator("127.0.0.1:0");
}

void LocalJob::StartCoordinator(const std::string& listen) {
  const std::string log = directory_ + "/coordinator.log";
  const std::size_t previous_starts = ReadJsonLines(log, "listening").size();
  std::vector<std::string> argv = {CoordinatorBinary(),
                                   "--listen",
                                   listen,
                                   "--job-token-file",
                                   directory_ + "/tokens",
                                   "--state-file",
                                   directory_ + "/state.json",
                                   "--tls-cert",
                                   directory_ + "/tls.crt",
                                   "--tls-key",
                                   directory_ + "/tls.key"};
  argv.insert(argv.end(), coordinator_args_.begin(), coordinator_args_.end());
  coordinator_ = std::make_unique<ChildProcess>(argv, log);
  port_ = 0;
  WaitUntil(
      [&] {
        const auto started = ReadJsonLines(log, "listening");
        if (started.size() > previous_starts) port_ = started.back().value("port", 0);
        return port_ > 0 || !coordinator_->Running();
      },
      std::chrono::seconds(30));
}

bool LocalJob::RestartCoordinator() {
  const int port = port_;
  coordinator_->Signal(SIGTERM);
  if (!coordinator_->Wait(std::chrono::seconds(30))) return false;
  StartCoordinator("127.0.0.1:" + std::to_string(port));
  return port_ == port;
}

ChildProcess& LocalJob::StartTrainer(const std::string& pod, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TrainerBinary(),
                                   "--coordinator",
                                   coordinator_address(),
                                   "--token-file",
                                   directory_ + "/token",
                                   "--coordinator-ca",
                                   directory_ + "/ca.crt",
                                   "--job",
                                   kTestJob,
                                   "--pod",
                                   pod,
                                   "--sample-log",
                                   sample_log(pod),
                                   "--collective-timeout-ms",
                                   "5000"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto child = std::make_unique<ChildProcess>(argv, trainer_log(pod));
  ChildProcess& reference = *child;
  trainers_[pod] = std::move(child);
  return reference;
}

int64_t LocalJob::LastStep(const std::string& pod) const {
  int64_t last = -1;
  for (const auto& line : ReadJsonLines(sample_log(pod)))
    last = std::max<int64_t>(last, line["step"]);
  return last;
}

int64_t LocalJob::LastGeneration(const std::string& pod) const {
  int64_t generation = 0;
  for (const auto& line : ReadJsonLines(sample_log(pod))) generation = line["generation"];
  return generation;
}

bool LocalJob::StopTrainers(std::chrono::milliseconds timeout) {
  for (auto& [pod, trainer] : trainers_) trainer->Signal(SIGTERM);
  bool clean = true;
  for (auto& [pod, trainer] : trainers_) {
    const std::optional<int> code = trainer->Wait(timeout);
    clean = clean && code.has_value() && (*code == 0 || *code == 128 + SIGKILL);
  }
  return clean;
}

}  // namespace fulcrum::testing
