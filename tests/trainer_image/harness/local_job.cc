#include "tests/trainer_image/harness/local_job.h"

#include <csignal>

namespace fulcrum::testing {

std::string TrainerBinary() {
  return FULCRUM_TRAINER_BINARY;
}
std::string CoordinatorBinary() {
  return FULCRUM_COORDINATOR_BINARY;
}

LocalJob::LocalJob(const std::string& test_name, const std::vector<std::string>& coordinator_args)
    : directory_(FreshDirectory(test_name)) {
  WriteFile(directory_ + "/tokens", std::string(kTestJob) + " " + kTestToken + "\n");
  WriteFile(directory_ + "/token", std::string(kTestToken) + "\n");
  std::vector<std::string> argv = {CoordinatorBinary(),
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--job-token-file",
                                   directory_ + "/tokens",
                                   "--state-file",
                                   directory_ + "/state.json"};
  argv.insert(argv.end(), coordinator_args.begin(), coordinator_args.end());
  coordinator_ = std::make_unique<ChildProcess>(argv, directory_ + "/coordinator.log");
  WaitUntil(
      [&] {
        for (const auto& line : ReadJsonLines(directory_ + "/coordinator.log", "listening")) {
          port_ = line.value("port", 0);
        }
        return port_ > 0 || !coordinator_->Running();
      },
      std::chrono::seconds(30));
}

ChildProcess& LocalJob::StartTrainer(const std::string& pod, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {TrainerBinary(),
                                   "--coordinator",
                                   coordinator_address(),
                                   "--token-file",
                                   directory_ + "/token",
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
