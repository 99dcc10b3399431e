// Fuzzes one JobSession with a sequence of trainer messages and clock ticks decoded from the
// input: Hello, StepReport, Heartbeat and Rejoin from a handful of pods, disconnects, live
// edits and time that only moves forward. After every operation it checks, through the public
// API only, what the trainers rely on:
//   - a new generation is assigned to ranks 0..n-1, each once, and members never share a rank;
//   - the membership generation never decreases, nor does the completed step;
//   - the Assignments of one call carry one generation, no older than any sent before, and
//     each is self-consistent: world size = batches, local batch = batches[rank], the batches
//     sum to the global batch of the job as configured.
// A violated invariant aborts with a message, so libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "operator/coordinator/job_session.h"

namespace {

using fulcrum::coordinator::Clock;
using fulcrum::coordinator::JobSession;
using fulcrum::coordinator::JobSessionConfig;
using fulcrum::coordinator::Outbox;

constexpr int kPods = 5;
constexpr int kMaxOperations = 256;
constexpr const char* kJob = "fuzz";
constexpr const char* kToken = "fuzz-token";

[[noreturn]] void Violated(const std::string& what) {
  std::fprintf(stderr, "job_session_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}
void Check(bool ok, const std::string& what) {
  if (!ok) Violated(what);
}

std::string PodName(int index) {
  return "pod-" + std::to_string(index);
}

// A double that is usually a plausible duration but sometimes anything at all.
double Seconds(FuzzedDataProvider& data) {
  switch (data.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return data.ConsumeFloatingPoint<double>();
    case 1:
      return 0.0;
    case 2:
      return std::nan("");
    default:
      return 0.001 * data.ConsumeIntegralInRange(1, 2000);
  }
}

JobSessionConfig MakeConfig(FuzzedDataProvider& data) {
  JobSessionConfig config;
  config.name = kJob;
  config.token = kToken;
  config.global_batch = data.ConsumeIntegralInRange(1, 300);
  config.min_workers = data.ConsumeIntegralInRange(1, 4);
  config.max_workers =
      data.ConsumeBool() ? 0 : data.ConsumeIntegralInRange(config.min_workers, kPods);
  config.policy = data.PickValueInArray({fulcrum::balancer::PolicyKind::kOptimal,
                                         fulcrum::balancer::PolicyKind::kProportional,
                                         fulcrum::balancer::PolicyKind::kEqual});
  config.interval_steps = data.ConsumeIntegralInRange(1, 20);
  config.min_gain = 0.01 * data.ConsumeIntegralInRange(0, 50);
  config.seed = data.ConsumeIntegral<uint8_t>();
  config.leave_timeout = std::chrono::milliseconds(data.ConsumeIntegralInRange(1, 5000));
  config.heartbeat_timeout = std::chrono::milliseconds(data.ConsumeIntegralInRange(1, 30000));
  config.settle = std::chrono::milliseconds(data.ConsumeIntegralInRange(0, 1000));
  config.min_apply_lead_steps = data.ConsumeIntegralInRange(1, 5);
  config.apply_lead_seconds = 0.1 * data.ConsumeIntegralInRange(0, 10);
  return config;
}

// What the fuzzer has seen sent, to check later messages against.
struct History {
  int64_t generation = 0;
  int64_t step = -1;
  int64_t assignment_generation = 0;
  std::map<std::string, fulcrum::v1::Assignment> assignment;  // the last one per pod
  std::set<int64_t> global_batches;                           // every one the job has had
};

// FULCRUM_FUZZ_TRACE=1: print every operation and the session after it, to read a crash.
const bool kTrace = std::getenv("FULCRUM_FUZZ_TRACE") != nullptr;

void CheckOutbox(const Outbox& out, const JobSession& job, History& history) {
  std::set<int64_t> generations;
  for (const auto& outgoing : out) {
    if (!outgoing.message.has_assignment()) continue;
    const fulcrum::v1::Assignment& a = outgoing.message.assignment();
    const std::string who = outgoing.pod + " (generation " + std::to_string(a.generation()) + ")";
    generations.insert(a.generation());
    Check(a.generation() >= history.assignment_generation,
          "assignment to " + who + " is older than one sent before");
    Check(a.generation() <= job.membership_generation(),
          "assignment to " + who + " is newer than the membership generation");
    Check(a.world_size() == a.batches_size(), "world size != number of batches for " + who);
    Check(a.rank() >= 0 && a.rank() < a.world_size(), "rank out of range for " + who);
    Check(a.local_batch() == a.batches(a.rank()), "local batch != batches[rank] for " + who);
    Check(a.accumulation_steps() >= 1, "accumulation steps < 1 for " + who);
    int64_t sum = 0;
    for (int batch : a.batches()) {
      Check(batch >= 0, "negative batch for " + who);
      sum += batch;
    }
    // The plan's B: after a live edit it is the old one until the next step splits the new.
    Check(sum == a.global_batch(),
          "batches do not sum to the assignment's global batch for " + who);
    Check(history.global_batches.contains(sum),
          "assignment's global batch " + std::to_string(sum) + " was never the job's for " + who);
    history.assignment[outgoing.pod] = a;
  }
  Check(generations.size() <= 1, "one call sent assignments of several generations");
  if (generations.empty()) return;
  // One call sends one plan: the same batches, world size and step to everyone it tells.
  const fulcrum::v1::Assignment* first = nullptr;
  std::set<int> ranks;
  for (const auto& outgoing : out) {
    if (!outgoing.message.has_assignment()) continue;
    const fulcrum::v1::Assignment& a = outgoing.message.assignment();
    if (first == nullptr) first = &a;
    Check(a.world_size() == first->world_size() && a.apply_at_step() == first->apply_at_step() &&
              std::equal(a.batches().begin(), a.batches().end(), first->batches().begin(),
                         first->batches().end()),
          "one call sent different plans");
    Check(ranks.insert(a.rank()).second,
          "one call sent rank " + std::to_string(a.rank()) + " twice");
  }
  // A new generation is announced to all of its ranks at once: 0..world size - 1, each once.
  const int64_t generation = *generations.begin();
  if (generation > history.assignment_generation) {
    Check(ranks.size() == static_cast<std::size_t>(first->world_size()),
          "a new generation's ranks are not dense 0..n-1");
  }
  history.assignment_generation = generation;
}

void CheckSnapshot(const JobSession& job, History& history) {
  const auto snapshot = job.Snapshot();
  if (kTrace) std::fprintf(stderr, "  -> %s\n", ToJson(snapshot).dump().c_str());
  Check(snapshot.membership_generation == job.membership_generation(),
        "snapshot generation differs from membership_generation()");
  Check(snapshot.membership_generation >= history.generation,
        "membership generation went back from " + std::to_string(history.generation) + " to " +
            std::to_string(snapshot.membership_generation));
  history.generation = snapshot.membership_generation;
  Check(snapshot.step >= history.step, "completed step went back from " +
                                           std::to_string(history.step) + " to " +
                                           std::to_string(snapshot.step));
  history.step = snapshot.step;
  std::vector<int> ranks;
  std::set<std::string> pods;
  for (const auto& member : snapshot.members) {
    Check(pods.insert(member.pod).second, "pod " + member.pod + " listed twice");
    if (member.rank >= 0) ranks.push_back(member.rank);
  }
  // Between a member leaving and the next generation forming, the generation has a hole where
  // the leaver was; the ranks still present are distinct (the assignments check density).
  std::sort(ranks.begin(), ranks.end());
  Check(std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end(), "two members share a rank");
  // Every rank has a batch in the plan. (Between a member leaving and the next generation
  // forming, the plan still has the leaver's rank too, so it may be longer.)
  if (!snapshot.plan.empty() && !ranks.empty()) {
    Check(static_cast<std::size_t>(ranks.back()) < snapshot.plan.size(),
          "a rank has no batch in the plan");
  }
}

fulcrum::v1::Hello MakeHello(FuzzedDataProvider& data, int pod, const History& history) {
  fulcrum::v1::Hello hello;
  hello.set_job(kJob);
  hello.set_pod(PodName(pod));
  hello.set_node("node-" + std::to_string(pod % 3));
  hello.set_gpu_product(data.PickValueInArray<const char*>(
      {"cpu", "", "NVIDIA-A100-SXM4-40GB", "Tesla-V100-SXM2-16GB", "Tesla-T4", "unknown-gpu"}));
  const int64_t memory = data.ConsumeBool() ? 0 : data.ConsumeIntegral<int64_t>();
  hello.set_gpu_memory(memory);
  hello.set_token(kToken);
  // A restarted process has another store address: the coordinator tells reconnects apart.
  hello.set_store_address(PodName(pod) + ":" +
                          std::to_string(29500 + data.ConsumeIntegral<uint8_t>() % 2));
  hello.set_step(data.ConsumeBool() ? 0 : data.ConsumeIntegralInRange<int64_t>(-2, 1000));
  hello.set_generation(data.ConsumeBool() ? history.generation
                                          : data.ConsumeIntegralInRange<int64_t>(-2, 100));
  return hello;
}

fulcrum::v1::StepReport MakeReport(FuzzedDataProvider& data, const std::string& pod,
                                   const History& history, int64_t step) {
  fulcrum::v1::StepReport report;
  const auto known = history.assignment.find(pod);
  const bool plausible = data.ConsumeIntegralInRange(0, 7) != 0;
  report.set_generation(plausible
                            ? history.generation
                            : data.ConsumeIntegralInRange<int64_t>(-1, history.generation + 2));
  report.set_step(step);
  report.set_local_batch(plausible && known != history.assignment.end()
                             ? known->second.local_batch()
                             : data.ConsumeIntegralInRange<int32_t>(-1, 400));
  report.set_compute_seconds(Seconds(data));
  report.set_comm_seconds(Seconds(data));
  report.set_after_compute_seconds(Seconds(data));
  report.set_step_seconds(report.compute_seconds() + report.after_compute_seconds());
  report.set_peak_memory(data.ConsumeIntegralInRange<int64_t>(0, int64_t{1} << 40));
  report.set_loss(1.0);
  report.set_out_of_memory(data.ConsumeIntegralInRange(0, 15) == 0);
  if (report.out_of_memory()) {
    report.set_out_of_memory_micro_batch(data.ConsumeIntegralInRange<int32_t>(-1, 300));
  }
  return report;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The session logs every generation; only errors are worth the fuzzer's time.
  setenv("FULCRUM_LOG_LEVEL", "error", /*overwrite=*/0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  FuzzedDataProvider data(bytes, size);
  auto created = JobSession::Create(MakeConfig(data));
  if (!created.ok()) Violated("a valid config was refused: " + created.error().ToString());
  JobSession job = std::move(created).value();
  Clock::time_point now{};
  History history;
  history.global_batches.insert(job.config().global_batch);

  for (int operation = 0; operation < kMaxOperations && data.remaining_bytes() > 0; ++operation) {
    const int pod = data.ConsumeIntegralInRange(0, kPods - 1);
    const std::string name = PodName(pod);
    Outbox out;
    const int kind = data.ConsumeIntegralInRange(0, 9);
    if (kTrace) std::fprintf(stderr, "operation %d: kind %d, pod %d\n", operation, kind, pod);
    switch (kind) {
      case 0:
        (void)job.Join(MakeHello(data, pod, history), now, out);
        break;
      case 1: {  // one pod reports a step near the current one
        const int64_t step = history.step + data.ConsumeIntegralInRange<int64_t>(-2, 3);
        (void)job.Report(name, MakeReport(data, name, history, step), now, out);
        break;
      }
      case 2:
      case 3: {  // every member of the generation reports the next step: training goes on
        const auto snapshot = job.Snapshot();
        const int64_t step = snapshot.step + 1;
        for (const auto& member : snapshot.members) {
          if (member.rank < 0) continue;
          (void)job.Report(member.pod, MakeReport(data, member.pod, history, step), now, out);
          CheckOutbox(out, job, history);
          out.clear();
        }
        break;
      }
      case 4: {
        fulcrum::v1::Heartbeat heartbeat;
        heartbeat.set_generation(data.ConsumeBool() ? history.generation
                                                    : data.ConsumeIntegral<int64_t>());
        (void)job.Heartbeat(name, heartbeat, now);
        break;
      }
      case 5: {
        fulcrum::v1::Rejoin rejoin;
        rejoin.set_generation(data.ConsumeBool() ? history.generation
                                                 : data.ConsumeIntegral<int64_t>());
        rejoin.set_reason("fuzz");
        (void)job.Rejoin(name, rejoin, now);
        break;
      }
      case 6:
        job.Disconnect(name, now);
        break;
      case 7: {  // a live edit: new global batch or limits
        JobSessionConfig config = job.config();
        config.global_batch = data.ConsumeIntegralInRange(1, 300);
        config.min_workers = data.ConsumeIntegralInRange(1, 4);
        config.max_workers =
            data.ConsumeBool() ? 0 : data.ConsumeIntegralInRange(config.min_workers, kPods);
        if (job.Reconfigure(config, now).ok()) history.global_batches.insert(config.global_batch);
        break;
      }
      default:  // time passes, up to past every timeout
        now += std::chrono::milliseconds(data.ConsumeIntegralInRange(0, 40000));
        (void)job.Tick(now, out);
        break;
    }
    CheckOutbox(out, job, history);
    CheckSnapshot(job, history);
  }
  return 0;
}
