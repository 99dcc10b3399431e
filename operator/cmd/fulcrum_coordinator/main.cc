// fulcrum-coordinator: serves the trainer Session stream for the jobs of a token file.
// Exit codes: 0 after SIGTERM/SIGINT, 2 invalid flags or token file, 1 cannot listen.
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <thread>

#include "common/log.h"
#include "operator/cmd/fulcrum_coordinator/coordinator_flags.h"
#include "operator/coordinator/coordinator_service.h"
#include "operator/coordinator/token_file.h"

namespace {

constexpr int kInvalidInput = 2;
constexpr auto kStatePeriod = std::chrono::milliseconds(500);

int Fail(const fulcrum::Error& error) {
  std::cerr << "fulcrum-coordinator: error: "
            << (error.field.empty() ? error.message : error.field + ": " + error.message) << "\n";
  return kInvalidInput;
}

// Write + rename, so readers never see half a file.
void WriteState(const std::string& path, const fulcrum::coordinator::CoordinatorService& service) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& job : service.Snapshot()) jobs.push_back(fulcrum::coordinator::ToJson(job));
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary);
    file << nlohmann::json{{"jobs", jobs}}.dump(2) << "\n";
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto flags = fulcrum::coordinator::ParseCoordinatorFlags(args);
  if (!flags.ok() && flags.error().field == "--help") {
    std::cout << flags.error().message;
    return 0;
  }
  if (!flags.ok()) return Fail(flags.error());
  auto tokens = fulcrum::coordinator::ReadTokenFile(flags->job_token_file);
  if (!tokens.ok()) return Fail(tokens.error());

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: sigwait below

  std::optional<fulcrum::coordinator::PemKeyPair> tls;
  if (!flags->insecure) {
    auto read = [](const std::string& path) {
      std::ifstream file(path);
      return std::string(std::istreambuf_iterator<char>(file), {});
    };
    tls = fulcrum::coordinator::PemKeyPair{read(flags->tls_certificate_file),
                                           read(flags->tls_key_file)};
    if (tls->certificate.find("BEGIN CERTIFICATE") == std::string::npos ||
        tls->private_key.find("PRIVATE KEY") == std::string::npos) {
      return Fail(fulcrum::InvalidArgument("--tls-cert", "no PEM certificate and key in " +
                                                             flags->tls_certificate_file + " and " +
                                                             flags->tls_key_file));
    }
  }
  auto server = fulcrum::coordinator::CoordinatorServer::Start(flags->listen, tls);
  if (!server.ok()) {
    std::cerr << "fulcrum-coordinator: error: " << server.error().ToString() << "\n";
    return 1;
  }
  for (const auto& [job, token] : *tokens) {
    fulcrum::coordinator::JobSessionConfig config = flags->job_template;
    config.name = job;
    config.token = token;
    if (auto status = (*server)->service().AddJob(config); !status.ok())
      return Fail(status.error());
  }
  fulcrum::log::Info("coordinator", "", "listening",
                     {{"port", (*server)->port()}, {"listen", flags->listen}});

  std::jthread state_writer;
  if (!flags->state_file.empty()) {
    state_writer = std::jthread([&](std::stop_token stop) {
      while (!stop.stop_requested()) {
        WriteState(flags->state_file, (*server)->service());
        std::this_thread::sleep_for(kStatePeriod);
      }
    });
  }
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  fulcrum::log::Info("coordinator", "", "shutting down", {{"signal", signal_number}});
  state_writer = {};
  if (!flags->state_file.empty()) WriteState(flags->state_file, (*server)->service());
  (*server)->Shutdown();
  return 0;
}
