// fulcrum-coordinator-load: the coordinator under load. Opens N Session streams (real gRPC,
// TLS, per-job tokens) that behave like trainers of jobs of --workers-per-job (Hello, a step
// report per rank at --steps-per-second per job, heartbeats, leaves and joins), against
//   the coordinator: the real CoordinatorService in a child process, and
//   the baseline: a bare gRPC service with the same port settings that discards every
//                message (the cost of gRPC, TLS and protobuf alone),
// one after the other for each N. Prints one JSON object: per N and server, the server's CPU
// per report and per message, memory and threads, and the time from a step's last report to
// its plan decision; and the coordinator's CPU per message over the baseline's.
//
//   fulcrum-coordinator-load [--streams 200,1600,3200] [--workers-per-job 8]
//                            [--steps-per-second 2] [--warmup-seconds 10]
//                            [--measure-seconds 20] [--churn-every-seconds 5] [--plaintext]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench/coordinator/emulated_job.h"
#include "bench/coordinator/job_driver.h"
#include "bench/coordinator/load_server.h"
#include "bench/coordinator/process_usage.h"
#include "bench/coordinator/server_process.h"
#include "operator/coordinator/tls_certificates.h"

namespace fulcrum::bench {
namespace {

struct LoadOptions {
  std::vector<int> streams = {200, 1600, 3200};
  int workers_per_job = 8;
  double steps_per_second = 2.0;
  double warmup_seconds = 10.0;
  double measure_seconds = 20.0;
  double churn_every_seconds = 5.0;
  double rejoin_after_seconds = 3.0;
  int heartbeat_ms = 250;
  double formation_timeout_seconds = 120.0;
  bool plaintext = false;
  std::string log_dir;  // the servers' logs; "" for a temporary folder, removed after a success
  std::vector<std::string> servers = {"bare", "coordinator"};
  uint64_t seed = 1;
};

// Four GPU products in equal numbers; per-sample costs in proportion to the balancer's
// catalog speeds (H100 3.72, A100 2.06, V100 1, T4 0.354), so that a job of 8 at B = 512
// takes about 0.45 s a step when balanced.
std::vector<EmulatedTrainerSpec> JobTrainers(const std::string& job, int workers) {
  const EmulatedGpu products[] = {
      {"NVIDIA-H100-80GB-HBM3", int64_t{80} << 30, 0.02, 0.0125 / 3.72},
      {"NVIDIA-A100-SXM4-80GB", int64_t{80} << 30, 0.02, 0.0125 / 2.06},
      {"Tesla-V100-SXM2-16GB", int64_t{16} << 30, 0.02, 0.0125},
      {"Tesla-T4", int64_t{16} << 30, 0.02, 0.0125 / 0.354},
  };
  std::vector<EmulatedTrainerSpec> trainers;
  for (int i = 0; i < workers; ++i) {
    trainers.push_back(
        {job + "-w" + std::to_string(i), job + "-node-" + std::to_string(i), products[i % 4]});
  }
  return trainers;
}

std::string RandomToken(std::mt19937_64& random) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token.push_back(kHex[random() % 16]);
  return token;
}

Result<nlohmann::json> ParseLine(const Result<std::string>& line) {
  if (!line.ok()) return line.error();
  try {
    return nlohmann::json::parse(*line);
  } catch (const nlohmann::json::exception& error) {
    return MakeError(ErrorCode::kInternal,
                     "the server answered \"" + *line + "\": " + error.what());
  }
}

struct Counts {
  uint64_t reports, heartbeats, steps, assignments, dropped, broken, written, written_reports;
};
Counts Snapshot(const LoadCounters& c) {
  return {c.reports.load(),          c.heartbeats.load(),       c.steps.load(),
          c.assignments.load(),      c.dropped_messages.load(), c.broken_streams.load(),
          c.written.messages.load(), c.written.reports.load()};
}

// The driver (JobDriver) and the churn: every --churn-every-seconds a trainer of a random,
// fully trained job leaves, and a new pod takes its place --rejoin-after-seconds later.
class Driver {
 public:
  Driver(std::vector<std::unique_ptr<EmulatedJob>>& jobs, const LoadOptions& options)
      : jobs_(jobs),
        options_(options),
        random_(options.seed),
        next_churn_(Clock::now() + Seconds(options.churn_every_seconds)),
        driver_(jobs, kThreads, [this](Clock::time_point now) { Churn(now); }) {}
  int churn_events() const { return churn_events_.load(); }

 private:
  static constexpr std::size_t kThreads = 4;

  // On the driver's first thread.
  void Churn(Clock::time_point now) {
    if (options_.churn_every_seconds > 0 && now >= next_churn_) {
      next_churn_ = now + Seconds(options_.churn_every_seconds);
      std::uniform_int_distribution<std::size_t> pick_job(0, jobs_.size() - 1);
      EmulatedJob& job = *jobs_[pick_job(random_)];
      if (job.FullyTraining()) {
        const std::size_t slot =
            std::uniform_int_distribution<std::size_t>(0, job.size() - 1)(random_);
        job.Leave(slot);
        joins_.push_back({&job, slot, now + Seconds(options_.rejoin_after_seconds)});
        ++churn_events_;
      }
    }
    std::erase_if(joins_, [&](const PendingJoin& join) {
      if (now < join.at) return false;
      join.job->Join(join.slot);
      return true;
    });
  }

  static Clock::duration Seconds(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  }

  struct PendingJoin {
    EmulatedJob* job;
    std::size_t slot;
    Clock::time_point at;
  };
  std::vector<std::unique_ptr<EmulatedJob>>& jobs_;
  const LoadOptions& options_;
  std::mt19937_64 random_;
  Clock::time_point next_churn_;
  std::vector<PendingJoin> joins_;
  std::atomic<int> churn_events_{0};
  JobDriver driver_;  // last: its threads call Churn
};

Result<nlohmann::json> RunCase(const LoadOptions& options, int streams, const std::string& kind,
                               const std::filesystem::path& work) {
  const int job_count = streams / options.workers_per_job;
  std::mt19937_64 random(options.seed + static_cast<uint64_t>(streams));
  std::vector<std::pair<std::string, std::string>> tokens;
  {
    std::ofstream file(work / "tokens");
    for (int j = 0; j < job_count; ++j) {
      tokens.emplace_back("job-" + std::to_string(j), RandomToken(random));
      file << tokens.back().first << " " << tokens.back().second << "\n";
    }
  }
  std::vector<std::string> arguments = {std::filesystem::read_symlink("/proc/self/exe").string(),
                                        "serve",
                                        "--kind",
                                        kind,
                                        "--tokens",
                                        (work / "tokens").string(),
                                        "--global-batch",
                                        std::to_string(64 * options.workers_per_job),
                                        "--min-workers",
                                        std::to_string(options.workers_per_job)};
  JobLoadSettings settings;
  settings.steps_per_second = options.steps_per_second;
  settings.heartbeat_period = std::chrono::milliseconds(options.heartbeat_ms);
  if (options.plaintext) {
    settings.credentials = grpc::InsecureChannelCredentials();
  } else {
    auto ca = coordinator::MakeCertificateAuthority("fulcrum-coordinator-load CA",
                                                    std::chrono::hours(24));
    if (!ca.ok()) return ca.error();
    auto serving = coordinator::IssueServingCertificate(*ca, {"127.0.0.1"}, std::chrono::hours(24));
    if (!serving.ok()) return serving.error();
    std::ofstream(work / "tls.crt") << serving->certificate;
    std::ofstream(work / "tls.key") << serving->private_key;
    arguments.insert(arguments.end(), {"--tls-cert", (work / "tls.crt").string(), "--tls-key",
                                       (work / "tls.key").string()});
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ca->certificate;
    settings.credentials = grpc::SslCredentials(tls);
  }
  const std::filesystem::path log_file =
      work / ("server-" + std::to_string(streams) + "-" + kind + ".log");
  auto server = ServerProcess::Spawn(arguments, log_file.string());
  if (!server.ok()) return server.error();
  auto hello = ParseLine((*server)->ReadLine());
  if (!hello.ok()) return hello.error();
  settings.address = "127.0.0.1:" + std::to_string((*hello)["port"].get<int>());

  LoadCounters counters;
  std::vector<std::unique_ptr<EmulatedJob>> jobs;
  for (int j = 0; j < job_count; ++j) {
    jobs.push_back(std::make_unique<EmulatedJob>(
        tokens[j].first, tokens[j].second, JobTrainers(tokens[j].first, options.workers_per_job),
        settings, counters, options.seed * 7919 + j));
  }
  nlohmann::json result = {{"streams", streams}, {"jobs", job_count}, {"server", kind}};
  // The machine's load around the window: other work on a shared machine shows here.
  auto load_average = [] {
    double load[1] = {0.0};
    return getloadavg(load, 1) == 1 ? load[0] : -1.0;
  };
  {
    // Driving from the start: the trainers that connected first send heartbeats while the
    // others are still connecting (thousands of TLS handshakes take seconds).
    Driver driver(jobs, options);
    const auto start = Clock::now();
    for (int j = 0; j < job_count; ++j) {
      // First steps spread over one step period, as independent jobs' are.
      jobs[j]->Start(start + std::chrono::microseconds(static_cast<int64_t>(
                                 1e6 / options.steps_per_second * j / job_count)),
                     /*free_running=*/kind == "bare");
    }
    // Every job forms its first generation and steps with all its trainers (the coordinator),
    // or the streams are up (bare).
    const auto formation_deadline =
        start + std::chrono::duration_cast<Clock::duration>(
                    std::chrono::duration<double>(options.formation_timeout_seconds));
    if (kind == "coordinator") {
      std::optional<Clock::time_point> last_first_step;
      while (!last_first_step && Clock::now() < formation_deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        last_first_step = start;
        for (const auto& job : jobs) {
          const auto first = job->first_full_step();
          if (!first) {
            last_first_step.reset();
            break;
          }
          last_first_step = std::max(*last_first_step, *first);
        }
      }
      if (!last_first_step) {
        return MakeError(ErrorCode::kDeadlineExceeded,
                         "not every job trained within " +
                             std::to_string(options.formation_timeout_seconds) + " s");
      }
      result["seconds_until_every_job_trains"] =
          std::chrono::duration<double>(*last_first_step - start).count();
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(options.warmup_seconds));

    auto reset = ParseLine((*server)->Ask("reset"));
    if (!reset.ok()) return reset.error();
    const int churn_before = driver.churn_events();
    const Counts before = Snapshot(counters);
    auto usage_before = ReadProcessUsage((*server)->pid());
    if (!usage_before.ok()) return usage_before.error();
    const double self_before = SelfCpuSeconds();
    const double load_before = load_average();
    const auto window_start = Clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(options.measure_seconds));
    const double window = std::chrono::duration<double>(Clock::now() - window_start).count();
    auto usage_after = ReadProcessUsage((*server)->pid());
    if (!usage_after.ok()) return usage_after.error();
    const double self_after = SelfCpuSeconds();
    const Counts after = Snapshot(counters);
    auto report = ParseLine((*server)->Ask("report"));
    if (!report.ok()) return report.error();

    const double cpu = usage_after->cpu_seconds - usage_before->cpu_seconds;
    // Per message written to the wire in the window (what the server had to read), not per
    // message queued: a client that falls behind must not flatter the server.
    const auto reports = static_cast<double>(after.written_reports - before.written_reports);
    const auto messages = static_cast<double>(after.written - before.written);
    result["window_seconds"] = window;
    result["server_cpu_seconds"] = cpu;
    result["server_cpu_cores"] = cpu / window;
    result["reports_queued"] = after.reports - before.reports;
    result["reports_written"] = reports;
    result["heartbeats_queued"] = after.heartbeats - before.heartbeats;
    result["messages_written"] = messages;
    result["server_cpu_microseconds_per_report"] = reports > 0 ? 1e6 * cpu / reports : 0.0;
    result["server_cpu_microseconds_per_message"] = messages > 0 ? 1e6 * cpu / messages : 0.0;
    result["server_rss_mib"] = usage_after->rss_mib;
    result["server_threads"] = usage_after->threads;
    result["job_steps_per_second"] =
        static_cast<double>(after.steps - before.steps) / window / job_count;
    result["assignments_received"] = after.assignments - before.assignments;
    result["churn_events"] = driver.churn_events() - churn_before;
    result["broken_streams"] = after.broken - before.broken;
    result["dropped_messages"] = after.dropped - before.dropped;
    result["generator_cpu_cores"] = (self_after - self_before) / window;
    result["server_report"] = *report;
    result["load_average"] = {load_before, load_average()};
  }
  jobs.clear();  // closes every stream before the server goes
  return result;
}

int RunLoad(const LoadOptions& options) {
  const std::filesystem::path work =
      !options.log_dir.empty() ? std::filesystem::path(options.log_dir)
                               : std::filesystem::temp_directory_path() /
                                     ("fulcrum-coordinator-load-" + std::to_string(getpid()));
  std::filesystem::create_directories(work);
  nlohmann::json cases = nlohmann::json::array();
  nlohmann::json comparisons = nlohmann::json::array();
  int exit_code = 0;
  for (const int streams : options.streams) {
    std::map<std::string, nlohmann::json> by_server;
    for (const std::string& kind : options.servers) {
      std::cerr << "fulcrum-coordinator-load: " << streams << " streams, " << kind << " server\n";
      auto result = RunCase(options, streams, kind, work);
      if (!result.ok()) {
        std::cerr << "fulcrum-coordinator-load: " << result.error().ToString()
                  << " (the server's log is in " << work.string() << ")\n";
        exit_code = 1;
        continue;
      }
      std::cerr << result->dump() << "\n";
      by_server[kind] = *result;
      cases.push_back(*result);
    }
    if (by_server.contains("bare") && by_server.contains("coordinator")) {
      const double bare = by_server["bare"]["server_cpu_microseconds_per_message"];
      const double coordinator = by_server["coordinator"]["server_cpu_microseconds_per_message"];
      comparisons.push_back(
          {{"streams", streams},
           {"coordinator_over_bare_cpu_per_message", bare > 0 ? coordinator / bare : 0.0}});
    }
  }
  // Else the servers' logs stay.
  if (exit_code == 0 && options.log_dir.empty()) std::filesystem::remove_all(work);
  nlohmann::json goals = nlohmann::json::array();
  for (const auto& result : cases) {
    if (result["server"] != "coordinator" || result["streams"] != 3200) continue;
    const double cores = result["server_cpu_cores"];
    const double p99 = result["server_report"]["report_to_decision_ms"]["p99"];
    goals.push_back({{"goal", "3,200 streams at under one core"},
                     {"measured_cores", cores},
                     {"met", cores < 1.0}});
    goals.push_back({{"goal", "p99 report-to-decision under 10 ms"},
                     {"measured_ms", p99},
                     {"met", p99 < 10.0}});
  }
  nlohmann::json output = {{"benchmark", "coordinator_load"},
                           {"emulated_trainers", true},
                           {"setup",
                            {{"workers_per_job", options.workers_per_job},
                             {"steps_per_second_per_job", options.steps_per_second},
                             {"heartbeat_after_silent_ms", options.heartbeat_ms},
                             {"warmup_seconds", options.warmup_seconds},
                             {"measure_seconds", options.measure_seconds},
                             {"churn_every_seconds", options.churn_every_seconds},
                             {"tls", !options.plaintext},
                             {"cpus", std::thread::hardware_concurrency()}}},
                           {"cases", cases},
                           {"comparisons", comparisons},
                           {"goals", goals}};
  std::cout << output.dump(2) << std::endl;
  return exit_code;
}

}  // namespace
}  // namespace fulcrum::bench

int main(int argc, char** argv) {
  using fulcrum::bench::LoadOptions;
  using fulcrum::bench::LoadServerOptions;
  LoadOptions options;
  LoadServerOptions serve;
  std::string kind = "coordinator";
  CLI::App app{
      "fulcrum-coordinator-load: N emulated trainers' Session streams against the coordinator "
      "and a bare gRPC baseline; prints JSON (docs/benchmarks.md).",
      "fulcrum-coordinator-load"};
  app.add_option("--streams", options.streams, "stream counts to run, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--workers-per-job", options.workers_per_job, "trainers per job")
      ->check(CLI::Range(1, 512))
      ->capture_default_str();
  app.add_option("--steps-per-second", options.steps_per_second, "steps per job per second")
      ->check(CLI::Range(0.1, 1000.0))
      ->capture_default_str();
  app.add_option("--warmup-seconds", options.warmup_seconds, "after every job trains")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--measure-seconds", options.measure_seconds, "the measured window")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--churn-every-seconds", options.churn_every_seconds,
                 "a trainer leaves (and a new one joins --rejoin-after-seconds later) this often; "
                 "0: never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--rejoin-after-seconds", options.rejoin_after_seconds)
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--servers", options.servers, "which servers, in order: bare, coordinator")
      ->delimiter(',')
      ->check(CLI::IsMember({"bare", "coordinator"}))
      ->capture_default_str();
  app.add_option("--heartbeat-ms", options.heartbeat_ms,
                 "a trainer sends a Heartbeat after this long without sending anything")
      ->check(CLI::Range(10, 60000))
      ->capture_default_str();
  app.add_flag("--plaintext", options.plaintext, "no TLS (the operator serves TLS by default)");
  app.add_option("--log-dir", options.log_dir,
                 "keep the servers' logs (and tokens, certificates) here");
  app.add_option("--seed", options.seed)->capture_default_str();
  CLI::App* serve_command =
      app.add_subcommand("serve", "the server side, started by the benchmark itself");
  serve_command->add_option("--kind", kind)->check(CLI::IsMember({"bare", "coordinator"}));
  serve_command->add_option("--tokens", serve.tokens_file)->required();
  serve_command->add_option("--tls-cert", serve.tls_certificate_file);
  serve_command->add_option("--tls-key", serve.tls_key_file);
  serve_command->add_option("--global-batch", serve.global_batch)->check(CLI::PositiveNumber);
  serve_command->add_option("--min-workers", serve.min_workers)->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (serve_command->parsed()) {
    serve.kind = kind == "bare" ? fulcrum::bench::ServerKind::kBareGrpc
                                : fulcrum::bench::ServerKind::kCoordinator;
    return fulcrum::bench::ServeLoad(serve);
  }
  for (const int streams : options.streams) {
    if (streams % options.workers_per_job != 0) {
      std::cerr << "fulcrum-coordinator-load: --streams: " << streams
                << " is not a multiple of --workers-per-job " << options.workers_per_job << "\n";
      return 2;
    }
  }
  return fulcrum::bench::RunLoad(options);
}
