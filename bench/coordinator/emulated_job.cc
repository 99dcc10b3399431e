#include "bench/coordinator/emulated_job.h"

#include <algorithm>
#include <set>
#include <utility>

namespace fulcrum::bench {
namespace {

constexpr double kTailSeconds = 0.02;  // the all-reduce and optimizer step after compute
constexpr double kNoise = 0.02;        // compute times vary by up to ±2% from step to step
constexpr int64_t kBaseMemory = int64_t{1} << 30;
constexpr int64_t kMemoryPerSample = int64_t{20} << 20;

// The batches in force at `step`: the latest plan applied at or before it.
const std::vector<int>* PlanAt(const std::map<int64_t, std::vector<int>>& plans, int64_t step) {
  auto it = plans.upper_bound(step);
  if (it == plans.begin()) return plans.empty() ? nullptr : &plans.begin()->second;
  return &std::prev(it)->second;
}

}  // namespace

EmulatedJob::EmulatedJob(std::string name, std::string token,
                         std::vector<EmulatedTrainerSpec> trainers, const JobLoadSettings& settings,
                         LoadCounters& counters, uint64_t seed)
    : name_(std::move(name)),
      token_(std::move(token)),
      specs_(std::move(trainers)),
      settings_(settings),
      counters_(counters),
      random_(seed) {
  slots_.resize(specs_.size());
  joins_.resize(specs_.size());
}

EmulatedJob::~EmulatedJob() {
  Stop();
}

void EmulatedJob::Start(Clock::time_point first_step, bool free_running) {
  std::lock_guard lock(mutex_);
  next_step_at_ = first_step;
  free_running_ = free_running;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    Open(slot, specs_[slot].pod, Clock::now());
  }
}

std::optional<Clock::time_point> EmulatedJob::first_full_step() const {
  std::lock_guard lock(mutex_);
  return first_full_step_;
}

void EmulatedJob::Open(std::size_t slot, const std::string& pod_name, Clock::time_point now) {
  auto trainer = std::make_unique<Trainer>();
  trainer->pod = pod_name;
  // Heartbeats spread over the period, as independent trainers' would be.
  trainer->next_heartbeat =
      now + std::chrono::milliseconds(std::uniform_int_distribution<int>(
                0, static_cast<int>(settings_.heartbeat_period.count()))(random_));
  grpc::ChannelArguments arguments;
  // A connection per trainer, as separate pods have: without this, channels to one address
  // share a subchannel.
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (!settings_.tls_server_name.empty()) {
    arguments.SetSslTargetNameOverride(settings_.tls_server_name);
  }
  auto channel = grpc::CreateCustomChannel(settings_.address, settings_.credentials, arguments);
  const std::string pod = trainer->pod;
  trainer->stream = std::make_unique<TrainerStream>(
      std::move(channel),
      [this, slot, pod](const fulcrum::v1::CoordinatorMessage& message) {
        OnMessage(slot, pod, message);
      },
      counters_.written);
  const EmulatedGpu& gpu = specs_[slot].gpu;
  fulcrum::v1::TrainerMessage hello;
  fulcrum::v1::Hello& body = *hello.mutable_hello();
  body.set_job(name_);
  body.set_pod(trainer->pod);
  body.set_node(specs_[slot].node);
  body.set_gpu_product(gpu.product);
  body.set_gpu_memory(gpu.memory_bytes);
  body.set_token(token_);
  body.set_store_address(trainer->pod + ":29500");
  if (free_running_) {
    const int world_size = static_cast<int>(slots_.size());
    trainer->generation = 1;
    trainer->rank = static_cast<int>(slot);
    trainer->world_size = world_size;
    const int total = 64 * world_size;
    std::vector<int> equal(slots_.size(), total / world_size);
    trainer->plans[0] = equal;
  }
  TrainerStream& stream = *trainer->stream;
  slots_[slot] = std::move(trainer);
  stream.Start(std::move(hello));
  counters_.hellos.fetch_add(1, std::memory_order_relaxed);
}

void EmulatedJob::OnMessage(std::size_t slot, const std::string& pod,
                            const fulcrum::v1::CoordinatorMessage& message) {
  if (!message.has_assignment()) return;  // Control (checkpoint, stop) has no effect here
  counters_.assignments.fetch_add(1, std::memory_order_relaxed);
  const fulcrum::v1::Assignment& assignment = message.assignment();
  std::lock_guard lock(mutex_);
  Trainer* trainer = slots_[slot].get();
  if (trainer == nullptr || trainer->pod != pod) return;  // for a trainer that has left
  if (assignment.generation() < trainer->generation) return;
  if (assignment.generation() > trainer->generation) {
    trainer->generation = assignment.generation();
    trainer->plans.clear();
  }
  trainer->rank = assignment.rank();
  trainer->world_size = assignment.world_size();
  trainer->plans[assignment.apply_at_step()] = {assignment.batches().begin(),
                                                assignment.batches().end()};
}

bool EmulatedJob::GenerationComplete(int64_t* generation) const {
  int64_t newest = 0;
  for (const auto& trainer : slots_) {
    if (trainer) newest = std::max(newest, trainer->generation);
  }
  if (newest == 0) return false;
  std::set<int> ranks;
  int world_size = 0;
  for (const auto& trainer : slots_) {
    if (!trainer) continue;
    if (trainer->generation != newest || trainer->stream->broken()) return false;
    ranks.insert(trainer->rank);
    world_size = trainer->world_size;
  }
  *generation = newest;
  return static_cast<int>(ranks.size()) == world_size && *ranks.begin() == 0 &&
         *ranks.rbegin() == world_size - 1;
}

bool EmulatedJob::FullyTraining() const {
  std::lock_guard lock(mutex_);
  int64_t generation = 0;
  return std::all_of(slots_.begin(), slots_.end(), [](const auto& t) { return t != nullptr; }) &&
         GenerationComplete(&generation);
}

void EmulatedJob::SendStep(int64_t generation) {
  std::uniform_real_distribution<double> noise(1.0 - kNoise, 1.0 + kNoise);
  struct Work {
    Trainer* trainer;
    int batch;
    double compute_seconds;
  };
  std::vector<Work> computes;
  double slowest = 0.0;
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    Trainer* trainer = slots_[slot].get();
    if (trainer == nullptr) continue;
    const std::vector<int>* batches = PlanAt(trainer->plans, next_step_);
    const int batch = batches != nullptr && trainer->rank < static_cast<int>(batches->size())
                          ? (*batches)[static_cast<std::size_t>(trainer->rank)]
                          : 0;
    const EmulatedGpu& gpu = specs_[slot].gpu;
    const double compute =
        batch == 0 ? 0.0 : (gpu.fixed_seconds + gpu.seconds_per_sample * batch) * noise(random_);
    slowest = std::max(slowest, compute);
    computes.push_back({trainer, batch, compute});
  }
  const double step_seconds = slowest + kTailSeconds;
  for (const auto& [trainer, batch, compute] : computes) {
    fulcrum::v1::TrainerMessage message;
    fulcrum::v1::StepReport& report = *message.mutable_step_report();
    report.set_generation(generation);
    report.set_step(next_step_);
    report.set_local_batch(batch);
    report.set_compute_seconds(compute);
    report.set_comm_seconds(step_seconds - compute);
    report.set_after_compute_seconds(step_seconds - compute);
    report.set_step_seconds(step_seconds);
    report.set_peak_memory(kBaseMemory + kMemoryPerSample * batch);
    report.set_loss(1.0);
    trainer->next_heartbeat = Clock::now() + settings_.heartbeat_period;
    if (trainer->stream->Send(std::move(message))) {
      counters_.reports.fetch_add(1, std::memory_order_relaxed);
    } else {
      counters_.dropped_messages.fetch_add(1, std::memory_order_relaxed);
    }
  }
  counters_.steps.fetch_add(1, std::memory_order_relaxed);
  if (!first_full_step_ && computes.size() == slots_.size()) first_full_step_ = Clock::now();
  ++next_step_;
}

void EmulatedJob::Tick(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  Reap();
  for (std::size_t slot = 0; slot < slots_.size(); ++slot) {
    Trainer* trainer = slots_[slot].get();
    if (trainer == nullptr) continue;
    if (trainer->stream->broken()) {  // the coordinator ended it: reconnect, as the pod
      counters_.broken_streams.fetch_add(1, std::memory_order_relaxed);
      trainer->stream->Close();
      leaving_.push_back(std::move(trainer->stream));
      const std::string pod = trainer->pod;
      Open(slot, pod, now);
      continue;
    }
    if (now >= trainer->next_heartbeat) {
      trainer->next_heartbeat = now + settings_.heartbeat_period;
      fulcrum::v1::TrainerMessage message;
      message.mutable_heartbeat()->set_generation(trainer->generation);
      if (trainer->stream->Send(std::move(message))) {
        counters_.heartbeats.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (now < next_step_at_) return;
  const auto period = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(1.0 / settings_.steps_per_second));
  next_step_at_ += period;
  if (next_step_at_ < now) next_step_at_ = now + period;  // fell behind: do not burst
  int64_t generation = 0;
  if (GenerationComplete(&generation)) SendStep(generation);
}

void EmulatedJob::Leave(std::size_t slot) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<Trainer> gone = std::move(slots_.at(slot));
  if (!gone) return;
  gone->stream->Close();
  leaving_.push_back(std::move(gone->stream));
  // The survivors' next all-reduce fails at once (connection reset): they ask for a new
  // generation, as fulcrum-trainer does.
  for (const auto& trainer : slots_) {
    if (!trainer || trainer->generation == 0) continue;
    fulcrum::v1::TrainerMessage message;
    message.mutable_rejoin()->set_generation(trainer->generation);
    message.mutable_rejoin()->set_reason("a peer's connection was reset");
    if (trainer->stream->Send(std::move(message))) {
      counters_.rejoins.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

void EmulatedJob::Join(std::size_t slot) {
  std::lock_guard lock(mutex_);
  if (slots_.at(slot)) return;
  Open(slot, specs_[slot].pod + "-r" + std::to_string(++joins_[slot]), Clock::now());
}

void EmulatedJob::Reap() {
  std::erase_if(leaving_, [](const auto& stream) { return stream->done(); });
}

void EmulatedJob::Stop() {
  std::vector<std::unique_ptr<TrainerStream>> streams;
  {
    std::lock_guard lock(mutex_);
    for (auto& trainer : slots_) {
      if (!trainer) continue;
      trainer->stream->Close();
      streams.push_back(std::move(trainer->stream));
      trainer.reset();
    }
    for (auto& stream : leaving_) streams.push_back(std::move(stream));
    leaving_.clear();
  }
  // Destroyed without the lock: each waits for gRPC's OnDone, and a callback still running
  // may be waiting for the lock.
  streams.clear();
}

}  // namespace fulcrum::bench
