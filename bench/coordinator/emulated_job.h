// One job's emulated trainers: they say Hello, follow the Assignments (generation, rank,
// batches from apply_at_step on), report every step at a set rate with compute times from a
// per-GPU cost line, send heartbeats, and leave and join when told. Every rank of a
// generation reports the same steps, as real ranks do after their all-reduce; a generation
// whose ranks are not all present (a member left) does not step until the next one forms.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/coordinator/trainer_stream.h"

namespace fulcrum::bench {

using Clock = std::chrono::steady_clock;

// An emulated GPU: its label and memory (as a trainer's Hello names them) and the cost line
// its compute time follows, c(b) = fixed + per_sample · b.
struct EmulatedGpu {
  std::string product;
  int64_t memory_bytes = 0;
  double fixed_seconds = 0.0;
  double seconds_per_sample = 0.0;
};

// One trainer of a job: its pod's name (a reconnect keeps it; a trainer that joins after one
// left is a new pod, named "<pod>-r<n>"), its node, its GPU.
struct EmulatedTrainerSpec {
  std::string pod;
  std::string node;
  EmulatedGpu gpu;
};

// What every job of a run has sent and received; read by the driver between windows.
struct LoadCounters {
  std::atomic<uint64_t> hellos{0};
  std::atomic<uint64_t> reports{0};
  std::atomic<uint64_t> heartbeats{0};
  std::atomic<uint64_t> rejoins{0};
  std::atomic<uint64_t> assignments{0};
  std::atomic<uint64_t> steps{0};             // job steps every rank reported
  std::atomic<uint64_t> dropped_messages{0};  // a stream's queue was full or it was closing
  std::atomic<uint64_t> broken_streams{0};    // ended by the coordinator, not by a leave
  TrainerStream::Written written;             // of the above, what gRPC has sent
};

struct JobLoadSettings {
  std::string address;  // the coordinator, host:port
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string tls_server_name;  // "" for plaintext
  double steps_per_second = 2.0;
  // A Heartbeat goes out when a trainer sent nothing for this long, as fulcrum-trainer's
  // CoordinatorLink does (trainer_image/trainer/membership/coordinator_link.h).
  std::chrono::milliseconds heartbeat_period{250};
};

class EmulatedJob {
 public:
  EmulatedJob(std::string name, std::string token, std::vector<EmulatedTrainerSpec> trainers,
              const JobLoadSettings& settings, LoadCounters& counters, uint64_t seed);
  ~EmulatedJob();
  EmulatedJob(const EmulatedJob&) = delete;
  EmulatedJob& operator=(const EmulatedJob&) = delete;

  const std::string& name() const { return name_; }
  // Opens every trainer's stream; the first step is due at `first_step`. `free_running`:
  // against a server that sends no Assignments (the baseline), every trainer takes rank =
  // slot in generation 1 with equal batches and steps regardless, so that the baseline gets
  // the same messages at the same rate.
  void Start(Clock::time_point first_step, bool free_running = false);
  // Sends what is due at `now`: the job's next step (when its generation is complete) and
  // heartbeats. Called by the driver every few milliseconds.
  void Tick(Clock::time_point now);
  // A trainer killed without a word: its stream is cancelled; the survivors' collective
  // fails, so they ask for a new generation (Rejoin). The slot stays empty until Join.
  void Leave(std::size_t slot);
  // A new trainer pod (a fresh name, no state) takes the empty slot.
  void Join(std::size_t slot);
  std::size_t size() const { return slots_.size(); }
  // Whether every trainer's stream is up and the job's current generation holds them all.
  bool FullyTraining() const;
  // When the job first completed a step with all its trainers, if it has.
  std::optional<Clock::time_point> first_full_step() const;
  void Stop();

 private:
  struct Trainer {
    std::string pod;
    std::unique_ptr<TrainerStream> stream;
    int64_t generation = 0;
    int rank = -1;
    int world_size = 0;
    std::map<int64_t, std::vector<int>> plans;  // apply_at_step -> batches, this generation
    Clock::time_point next_heartbeat;           // moved on by every message sent
  };

  // Opens the slot's stream as `pod`.
  void Open(std::size_t slot, const std::string& pod, Clock::time_point now);  // requires mutex_
  void OnMessage(std::size_t slot, const std::string& pod,
                 const fulcrum::v1::CoordinatorMessage& message);
  bool GenerationComplete(int64_t* generation) const;  // requires mutex_
  void SendStep(int64_t generation);                   // requires mutex_
  void Reap();                                         // requires mutex_

  const std::string name_;
  const std::string token_;
  const std::vector<EmulatedTrainerSpec> specs_;
  const JobLoadSettings settings_;
  LoadCounters& counters_;
  mutable std::mutex mutex_;
  std::mt19937_64 random_;
  std::vector<std::unique_ptr<Trainer>> slots_;          // null: the slot's trainer left
  std::vector<std::unique_ptr<TrainerStream>> leaving_;  // cancelled, until gRPC is done
  std::vector<int> joins_;  // by slot: new pods that took it after a leave
  int64_t next_step_ = 0;
  bool free_running_ = false;
  std::optional<Clock::time_point> first_full_step_;
  Clock::time_point next_step_at_;
};

}  // namespace fulcrum::bench
