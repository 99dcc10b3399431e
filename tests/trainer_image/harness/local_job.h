// A coordinator and trainers as real processes on loopback, for the multi-process tests.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/trainer_image/harness/process_harness.h"

namespace fulcrum::testing {

inline constexpr const char* kTestJob = "test-job";
inline constexpr const char* kTestToken = "test-token-0123456789";

class LocalJob {
 public:
  // Starts fulcrum-coordinator for job kTestJob with `coordinator_args` added.
  LocalJob(const std::string& test_name, const std::vector<std::string>& coordinator_args);

  const std::string& directory() const { return directory_; }
  int coordinator_port() const { return port_; }
  bool coordinator_ready() const { return port_ > 0; }
  std::string coordinator_address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Stops the coordinator (SIGTERM) and starts a new one on the same port and flags.
  bool RestartCoordinator();
  // Starts a trainer named `pod` in coordinator mode; its log is <dir>/<pod>.log and its
  // sample log <dir>/<pod>.samples.
  ChildProcess& StartTrainer(const std::string& pod, const std::vector<std::string>& args);
  ChildProcess& trainer(const std::string& pod) { return *trainers_.at(pod); }
  std::string trainer_log(const std::string& pod) const { return directory_ + "/" + pod + ".log"; }
  std::string sample_log(const std::string& pod) const {
    return directory_ + "/" + pod + ".samples";
  }
  // Generation of `pod`'s last committed step, 0 if none.
  int64_t LastGeneration(const std::string& pod) const;
  // Steps committed by `pod` so far (from its sample log), -1 if none.
  int64_t LastStep(const std::string& pod) const;
  // Sends SIGTERM to every trainer and waits for them; true if all exited 0.
  bool StopTrainers(std::chrono::milliseconds timeout);

 private:
  std::string directory_;
  void StartCoordinator(const std::string& listen);
  std::vector<std::string> coordinator_args_;
  std::unique_ptr<ChildProcess> coordinator_;
  int port_ = 0;
  std::map<std::string, std::unique_ptr<ChildProcess>> trainers_;
};

std::string TrainerBinary();
std::string CoordinatorBinary();

}  // namespace fulcrum::testing
