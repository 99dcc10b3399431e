// fulcrum-operator-load-trainers: the trainers of many HeteroTrainingJobs, emulated, for the
// operator's scale benchmark (bench/operator/operator_scale_bench.py). Every trainer pod the
// operator created is played by one emulated trainer (bench/coordinator/emulated_job.h) under
// the pod's name, on its node, with the job's token: a real TLS Session stream to the
// operator's coordinator that says Hello, follows Assignments, reports a step at
// --steps-per-second per job with compute times from its GPU product's cost line, heartbeats
// and reconnects as fulcrum-trainer does. No GPU, no training: only the coordinator's traffic.
//
//   fulcrum-operator-load-trainers --jobs FILE [--steps-per-second 2] [--report-seconds 5]
//
// FILE: {"address": "host:port", "ca_file": "ca.crt" (absent: plaintext),
//        "tls_server_name": "" (optional), "jobs": [{"name": "ns/name", "token": "...",
//        "trainers": [{"pod": "...", "node": "...", "product": "...", "memory_mib": 81920}]}]}
// Prints one JSON line of counters every --report-seconds, and a last one on SIGTERM/SIGINT.
#include <CLI/CLI.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/coordinator/emulated_job.h"
#include "bench/coordinator/job_driver.h"
#include "bench/coordinator/process_usage.h"

namespace fulcrum::bench {
namespace {

// Per-sample costs in proportion to the balancer's catalog speeds (operator/balancer/
// gpu_catalog.cc: H100 3.72, A100 2.06, V100 1, T4 0.354), as fulcrum-coordinator-load's, so
// that the first plan (from the catalog) is close and measurements refine it.
EmulatedGpu GpuFor(const std::string& product, int64_t memory_mib) {
  struct Speed {
    const char* name;
    double relative;
  };
  constexpr Speed kSpeeds[] = {{"H100", 3.72}, {"A100", 2.06}, {"V100", 1.0}, {"T4", 0.354}};
  double speed = 1.0;
  for (const Speed& known : kSpeeds) {
    if (product.find(known.name) != std::string::npos) speed = known.relative;
  }
  return {product, memory_mib << 20, 0.02, 0.0125 / speed};
}

nlohmann::json Counters(const LoadCounters& counters,
                        const std::vector<std::unique_ptr<EmulatedJob>>& jobs,
                        Clock::time_point start) {
  int fully_training = 0;
  int stepped = 0;
  for (const auto& job : jobs) {
    fully_training += job->FullyTraining() ? 1 : 0;
    stepped += job->first_full_step() ? 1 : 0;
  }
  return {{"seconds", std::chrono::duration<double>(Clock::now() - start).count()},
          {"jobs", jobs.size()},
          {"jobs_fully_training", fully_training},
          {"jobs_stepped_with_all", stepped},
          {"hellos", counters.hellos.load()},
          {"reports", counters.reports.load()},
          {"heartbeats", counters.heartbeats.load()},
          {"rejoins", counters.rejoins.load()},
          {"assignments", counters.assignments.load()},
          {"steps", counters.steps.load()},
          {"dropped_messages", counters.dropped_messages.load()},
          {"broken_streams", counters.broken_streams.load()},
          {"messages_written", counters.written.messages.load()},
          {"cpu_seconds", SelfCpuSeconds()}};
}

struct Options {
  std::string jobs_file;
  double steps_per_second = 2.0;
  double report_seconds = 5.0;
  int heartbeat_ms = 250;
  std::size_t threads = 4;
  uint64_t seed = 1;
};

int Run(const Options& options, sigset_t signals) {
  nlohmann::json plan;
  try {
    std::ifstream file(options.jobs_file);
    if (!file) {
      std::cerr << "fulcrum-operator-load-trainers: cannot read " << options.jobs_file << "\n";
      return 2;
    }
    plan = nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    std::cerr << "fulcrum-operator-load-trainers: " << options.jobs_file << ": " << error.what()
              << "\n";
    return 2;
  }
  JobLoadSettings settings;
  settings.address = plan.value("address", "");
  settings.tls_server_name = plan.value("tls_server_name", "");
  settings.steps_per_second = options.steps_per_second;
  settings.heartbeat_period = std::chrono::milliseconds(options.heartbeat_ms);
  if (const std::string ca_file = plan.value("ca_file", ""); ca_file.empty()) {
    settings.credentials = grpc::InsecureChannelCredentials();
  } else {
    std::ifstream ca(ca_file);
    std::stringstream pem;
    pem << ca.rdbuf();
    if (!ca || pem.str().empty()) {
      std::cerr << "fulcrum-operator-load-trainers: cannot read the CA " << ca_file << "\n";
      return 2;
    }
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = pem.str();
    settings.credentials = grpc::SslCredentials(tls);
  }

  LoadCounters counters;
  std::vector<std::unique_ptr<EmulatedJob>> jobs;
  try {
    for (const nlohmann::json& job : plan.at("jobs")) {
      std::vector<EmulatedTrainerSpec> trainers;
      for (const nlohmann::json& trainer : job.at("trainers")) {
        trainers.push_back(
            {trainer.at("pod").get<std::string>(), trainer.at("node").get<std::string>(),
             GpuFor(trainer.value("product", ""), trainer.value("memory_mib", int64_t{16384}))});
      }
      jobs.push_back(std::make_unique<EmulatedJob>(
          job.at("name").get<std::string>(), job.at("token").get<std::string>(),
          std::move(trainers), settings, counters, options.seed * 7919 + jobs.size()));
    }
  } catch (const nlohmann::json::exception& error) {
    std::cerr << "fulcrum-operator-load-trainers: " << options.jobs_file << ": " << error.what()
              << "\n";
    return 2;
  }

  const auto start = Clock::now();
  {
    // Driving from the start: the trainers that connected first heartbeat while the others
    // still connect (a thousand TLS handshakes take seconds).
    JobDriver driver(jobs, options.threads);
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      // First steps spread over one step period, as independent jobs' are.
      jobs[j]->Start(start + std::chrono::microseconds(static_cast<int64_t>(
                                 1e6 / options.steps_per_second * static_cast<double>(j) /
                                 static_cast<double>(jobs.size()))));
    }
    const auto period = std::chrono::duration<double>(options.report_seconds);
    const auto whole = std::chrono::duration_cast<std::chrono::seconds>(period);
    timespec wait{.tv_sec = whole.count(),
                  .tv_nsec = static_cast<long>((period - whole).count() * 1e9)};
    while (sigtimedwait(&signals, nullptr, &wait) < 0) {
      std::cout << Counters(counters, jobs, start).dump() << std::endl;
    }
    std::cout << Counters(counters, jobs, start).dump() << std::endl;
  }
  for (auto& job : jobs) job->Stop();
  jobs.clear();
  return 0;
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) {
  fulcrum::bench::Options options;
  CLI::App app{
      "fulcrum-operator-load-trainers: emulated trainers for every pod of the operator's "
      "HeteroTrainingJobs; prints JSON lines of counters (docs/benchmarks.md).",
      "fulcrum-operator-load-trainers"};
  app.add_option("--jobs", options.jobs_file, "JSON file: coordinator address, CA, jobs")
      ->required();
  app.add_option("--steps-per-second", options.steps_per_second, "steps per job per second")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--report-seconds", options.report_seconds, "seconds between counter lines")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  app.add_option("--heartbeat-ms", options.heartbeat_ms, "heartbeat after this much silence")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_option("--threads", options.threads, "driver threads")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--seed", options.seed, "seed of the trainers' jitter")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Blocked before any thread starts, so that only sigtimedwait takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return fulcrum::bench::Run(options, signals);
}
