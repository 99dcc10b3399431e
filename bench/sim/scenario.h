// A simulated heterogeneous cluster, read from YAML (bench/scenarios/*.yaml): GPU profiles
// with their true costs, the worker mix, measurement noise, and events (slowdown, join,
// leave). Only the simulator sees the true costs; the balancer sees noisy reports.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::sim {

struct GpuProfile {
  std::string product;  // the label the worker reports, as GPU Feature Discovery writes it
  double fixed_seconds = 0.0;
  double seconds_per_sample = 0.0;
  double memory_gib = 0.0;
  double memory_base_gib = 0.0;        // weights, optimizer state, workspace
  double memory_per_sample_gib = 0.0;  // activations per sample
  std::string source;                  // where the numbers come from
  // 0: the line holds down to batch 1. Else below this micro-batch a step takes longer than
  // at it, c(b) = c(m)·(2 − b/m): batch 1 about twice c(m), as measured on CPU (threads left
  // idle); GPUs have a minimum efficient batch too. The line c(b) = a + k·b cannot say so.
  int min_efficient_batch = 0;
};

struct WorkerGroup {
  std::string profile;
  int count = 0;
};

enum class EventKind { kSlowdown, kLeave, kJoin };

struct Event {
  int64_t step = 0;
  EventKind kind = EventKind::kSlowdown;
  std::string worker;   // slowdown, leave
  double factor = 1.0;  // slowdown: compute time multiplier from this step on
  WorkerGroup joiners;  // join
};

struct Noise {
  double compute = 0.0;              // relative std. dev. of reported compute time
  double comm = 0.0;                 // relative std. dev. of the reported all-reduce tail
  double outlier_probability = 0.0;  // chance a report is inflated (a GC pause in the timer)
  double outlier_factor = 1.0;
  // Relative std. dev. of the true compute time from step to step (data-dependent kernels,
  // clocks, host interference): unlike the fields above, it slows the step itself.
  double jitter = 0.0;
  // Mean of an exponential wait added to every step's compute (trainers sharing cores or a
  // PCIe switch). A slowdown does not scale it: an emulated slowdown multiplies compute, not
  // the wait for a core (issue 25), so a slowed worker's line no longer reaches batch 1.
  double contention_seconds = 0.0;
  // A wait added to a worker's first steps after it joins, fading linearly to none over
  // startup_steps: a trainer's start-up (its data pipeline filling its prefetch queue,
  // allocators growing, trainers starting together on shared cores), which no batch size scales.
  double startup_seconds = 0.0;
  int startup_steps = 0;
  // Workers that share one device (trainers on one GPU under MPS, each with its own share of the
  // multiprocessors, or on shared cores) slow each other down while they compute at the same
  // time: they share its memory bandwidth and caches. A worker's compute is multiplied by
  // 1 + shared_device · Σ_j overlap_j / own, overlap_j the time worker j computes alongside it
  // (all start together after the all-reduce). So its cost depends on the others' batches,
  // which no per-worker cost c_i(b) describes. 0: separate devices.
  double shared_device = 0.0;
};

struct Scenario {
  std::string name;
  std::string description;
  int global_batch = 0;
  int64_t steps = 0;
  uint64_t seed = 1;
  double tail_seconds = 0.0;  // true all-reduce time not hidden by the backward pass
  int interval_steps = 10;
  double min_gain = 0.05;
  std::optional<double> gain_noise_sigmas;       // unset: ControllerConfig's default
  std::optional<int> slowdown_evidence_to_plan;  // unset: ControllerConfig's default
  std::optional<int> speed_evidence_to_plan;     // unset: ControllerConfig's default
  std::optional<double> support_sigmas;          // unset: FitterConfig's default
  std::optional<int> stale_after_reports;        // unset: FitterConfig's default
  // Steps between a decision and the step it applies to, as the coordinator's plan lead: a
  // plan decided after step t runs from t + lead, and the workers report the old batches until
  // then. 0: the decision applies to the step it is made for.
  int apply_lead_steps = 0;
  Noise noise;
  std::map<std::string, GpuProfile> profiles;
  std::vector<WorkerGroup> workers;
  std::vector<Event> events;  // sorted by step
};

// Errors name the YAML path, e.g. "profiles.T4.seconds_per_sample: must be > 0".
Result<Scenario> LoadScenario(const std::string& path);
Result<Scenario> ParseScenario(const std::string& yaml_text);

}  // namespace fulcrum::sim
