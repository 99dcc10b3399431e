// What the coordinator needs to know about one job: its secret, its global batch, how many
// workers it waits for, and the balancing and liveness settings.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "operator/balancer/adaptive_batch.h"
#include "operator/balancer/policy_kind.h"

namespace fulcrum::coordinator {

struct JobSessionConfig {
  std::string name;
  std::string token;  // trainers must present it in Hello
  int global_batch = 0;
  // A job starts (generation 1, or again after every trainer left) once this many trainers
  // are connected; in between it goes on with whoever is left.
  int min_workers = 1;
  int max_workers = 0;  // 0: no cap; extra trainers wait as spares
  balancer::PolicyKind policy = balancer::PolicyKind::kOptimal;
  int interval_steps = 10;
  double min_gain = 0.05;
  uint64_t seed = 0;
  // A trainer whose stream closed is removed after this long unless it reconnects.
  std::chrono::milliseconds leave_timeout{2000};
  // A trainer that sent nothing for this long is removed (hung process, lost network).
  std::chrono::milliseconds heartbeat_timeout{15000};
  // A member of the current generation that sent nothing for this long, while others of it
  // were heard, is hung (stopped, stuck in the kernel, cut off): the next generation leaves it
  // out and tells the others to abandon their collective with it, which would otherwise hold
  // them for the whole collective timeout. Trainers send something every 250 ms, so this is
  // four missed heartbeats. Its stream stays open; once it speaks again it is taken back in a
  // new generation. 0: off (only heartbeat_timeout removes a silent trainer).
  std::chrono::milliseconds hang_timeout{1000};
  // Membership events closer than this are folded into one new generation.
  std::chrono::milliseconds settle{300};
  // A new plan is applied at least this many steps after the step that triggered it, and
  // at least apply_lead_seconds of measured step time later, so that rank 0, whose view every
  // rank adopts in band, has it in time; one that comes late switches every rank a step or
  // more later, together (docs/protocol.md). The stream delivers it in about a millisecond.
  // It was 0.3 s: at 6-10 ms steps every plan and new global batch then landed 30-50 steps
  // late, and adaptive batching's time to target on MNIST went from 0.68x fixed B to 0.83x
  // (docs/benchmarks.md); steps of 10 ms or more get the 3-step minimum.
  int min_apply_lead_steps = 3;
  double apply_lead_seconds = 0.03;
  // The recipe edited live (spec.training): every Assignment carries it and a change is sent
  // with the next plan lead, so every rank applies it at the same step. 0: the trainers' flags.
  double learning_rate = 0.0;
  int64_t total_steps = 0;
  // spec.batching: in adaptive mode the coordinator chooses the global batch itself within
  // [min_batch, max_batch] for goodput, starting at global_batch (B0, the batch learning_rate is
  // for), and scales learning_rate with it (global_batch_tuner.h). Off: B is global_batch.
  struct AdaptiveBatching {
    bool enabled = false;
    int min_batch = 0;
    int max_batch = 0;
    int64_t min_steps_between_changes = 100;
    double max_factor = 4.0;
    double min_gain = 0.05;
    balancer::LearningRateScaling scaling = balancer::LearningRateScaling::kAdaScale;
    // The gradient noise estimate's memory, in steps (estimated in either mode, for status).
    double noise_half_life_steps = 100.0;
  } batching;
};

// Checks every field; the error names the field and the fix.
Status ValidateJobConfig(const JobSessionConfig& config);

}  // namespace fulcrum::coordinator
