#include "bench/coordinator/load_server.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <vector>

#include "operator/coordinator/coordinator_service.h"
#include "operator/coordinator/token_file.h"

namespace fulcrum::bench {
namespace {

using fulcrum::v1::CoordinatorMessage;
using fulcrum::v1::TrainerMessage;

// Reads a stream to its end and drops every message. gRPC owns each reactor from Session()
// until OnDone, which is where the callback API lets it go.
class DiscardingSession final : public grpc::ServerBidiReactor<TrainerMessage, CoordinatorMessage> {
 public:
  explicit DiscardingSession(std::atomic<uint64_t>& received) : received_(received) {
    StartRead(&message_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    received_.fetch_add(1, std::memory_order_relaxed);
    StartRead(&message_);
  }
  void OnDone() override { std::unique_ptr<DiscardingSession> self(this); }

 private:
  std::atomic<uint64_t>& received_;
  TrainerMessage message_;
};

class DiscardingService final : public fulcrum::v1::Coordinator::CallbackService {
 public:
  grpc::ServerBidiReactor<TrainerMessage, CoordinatorMessage>* Session(
      grpc::CallbackServerContext* /*context*/) override {
    return std::make_unique<DiscardingSession>(received_).release();
  }
  uint64_t received() const { return received_.load(); }

 private:
  std::atomic<uint64_t> received_{0};
};

// Step completions as the coordinator reports them (StepCompletion).
class StepLatencies {
 public:
  void Add(const coordinator::StepCompletion& completion) {
    std::lock_guard lock(mutex_);
    microseconds_.push_back(std::chrono::duration<double, std::micro>(completion.latency).count());
    if (completion.messages_sent > 0) ++plans_sent_;
  }
  void Reset() {
    std::lock_guard lock(mutex_);
    microseconds_.clear();
    plans_sent_ = 0;
  }
  nlohmann::json Report() {
    std::lock_guard lock(mutex_);
    std::vector<double> sorted = microseconds_;
    std::sort(sorted.begin(), sorted.end());
    auto quantile = [&](double q) {
      if (sorted.empty()) return 0.0;
      const auto index = static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1));
      return sorted[index] / 1000.0;
    };
    return {{"step_completions", sorted.size()},
            {"plans_sent", plans_sent_},
            {"report_to_decision_ms",
             {{"p50", quantile(0.5)}, {"p99", quantile(0.99)}, {"max", quantile(1.0)}}}};
  }

 private:
  std::mutex mutex_;
  std::vector<double> microseconds_;
  uint64_t plans_sent_ = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return {std::istreambuf_iterator<char>(file), {}};
}

}  // namespace

int ServeLoad(const LoadServerOptions& options) {
  auto tokens = coordinator::ReadTokenFile(options.tokens_file);
  if (!tokens.ok()) {
    std::cerr << "serve: " << tokens.error().ToString() << "\n";
    return 2;
  }
  std::optional<coordinator::PemKeyPair> tls;
  if (!options.tls_certificate_file.empty()) {
    tls = coordinator::PemKeyPair{ReadFile(options.tls_certificate_file),
                                  ReadFile(options.tls_key_file)};
  }
  coordinator::CoordinatorService coordinator_service;
  DiscardingService bare_service;
  StepLatencies latencies;
  int port = 0;
  grpc::ServerBuilder builder;
  coordinator::ConfigureCoordinatorServer(builder, "127.0.0.1:0", tls, &port);
  if (options.kind == ServerKind::kCoordinator) {
    for (const auto& [job, token] : *tokens) {
      coordinator::JobSessionConfig config;
      config.name = job;
      config.token = token;
      config.global_batch = options.global_batch;
      config.min_workers = options.min_workers;
      if (Status added = coordinator_service.AddJob(config); !added.ok()) {
        std::cerr << "serve: " << added.error().ToString() << "\n";
        return 2;
      }
    }
    coordinator_service.SetStepObserver(
        [&latencies](const coordinator::StepCompletion& completion) { latencies.Add(completion); });
    builder.RegisterService(&coordinator_service);
  } else {
    builder.RegisterService(&bare_service);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "serve: cannot listen on 127.0.0.1\n";
    return 1;
  }
  std::cout << nlohmann::json{{"port", port}}.dump() << std::endl;
  uint64_t received_at_reset = 0;
  for (std::string command; std::getline(std::cin, command);) {
    if (command == "reset") {
      latencies.Reset();
      received_at_reset = bare_service.received();
      std::cout << nlohmann::json{{"ok", true}}.dump() << std::endl;
    } else if (command == "report") {
      nlohmann::json report = latencies.Report();
      if (options.kind == ServerKind::kBareGrpc) {
        report["messages_received"] = bare_service.received() - received_at_reset;
      } else {
        int training = 0;
        for (const auto& job : coordinator_service.Snapshot()) {
          if (job.membership_generation > 0 && job.step >= 0) ++training;
        }
        report["jobs_training"] = training;
      }
      std::cout << report.dump() << std::endl;
    } else {
      std::cout << nlohmann::json{{"error", "unknown command \"" + command + "\""}}.dump()
                << std::endl;
    }
  }
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace fulcrum::bench
