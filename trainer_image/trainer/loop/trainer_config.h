// Everything one fulcrum-trainer process is told: how it joins its job, what it trains and how
// it runs. Torch-free. Filled from the command line (trainer_flags.h) or by a benchmark; each
// layer's part is that layer's own options struct, so no layer depends on the command line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer_image/trainer/collective/connect_collective.h"
#include "trainer_image/trainer/data/dataset_options.h"
#include "trainer_image/trainer/data/transform_options.h"
#include "trainer_image/trainer/device/device_kind.h"
#include "trainer_image/trainer/model/learning_rate_schedule.h"
#include "trainer_image/trainer/model/model_options.h"
#include "trainer_image/trainer/model/optimizer_options.h"
#include "trainer_image/trainer/model/precision_options.h"

namespace fulcrum::trainer {

struct TrainerConfig {
  // Membership: a coordinator (normal), or a fixed group for tests and benchmarks.
  std::string job = "local";
  std::string coordinator;  // host:port; empty selects the static group below
  std::string token_file;   // file holding the job token (first line)
  // The coordinator serves TLS: its CA certificate (PEM file) to verify it against. Plaintext
  // only with coordinator_insecure, for a local coordinator.
  std::string coordinator_ca;
  bool coordinator_insecure = false;
  std::string pod;   // default: <hostname>-<pid>
  std::string node;  // default: hostname
  // The image this trainer runs (FULCRUM_IMAGE, set by the operator), named in device errors.
  std::string image;
  std::string gpu_product = "cpu";
  int rank = 0;                    // static group only
  int world_size = 1;              // static group only
  std::string rendezvous;          // static group only: host:port; rank 0 serves the store there
  std::vector<int> batches;        // static group only: every rank's local batch
  std::string host = "127.0.0.1";  // address its store, Gloo transport and metrics bind to

  // What is trained, on what, and how.
  ModelOptions model;
  DatasetOptions data;
  TransformOptions transform;
  PrecisionOptions precision;
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  // Steps in a row with a non-finite loss (updates skipped on every rank) that end training.
  int max_nonfinite_steps = 10;
  // Clip the aggregated gradient to this global L2 norm (0: no clipping).
  double clip_gradient_norm = 0.0;
  bool shuffle = true;  // a new permutation of the samples every epoch
  uint64_t seed = 1;    // sample order (the model and synthetic data have their own copies)
  int64_t steps = 0;    // stop after this many optimizer steps in total; 0 = run until stopped
  // Stop once every sample of this many epochs is trained (the last step partial); 0 = off.
  // Counted in samples, so it stays exact when the global batch changes.
  int64_t epochs = 0;

  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // steps; 0 = only on SIGTERM / STOP
  // Weights to start from when there is no checkpoint to resume: a model.pt (TorchScript) or a
  // checkpoint file of another job; parameters and buffers by name, shapes must match.
  std::string init_from;
  // Rank 0 writes the trained module (model.pt) and model.json here when training finishes.
  std::string output_dir;
  // A packed dataset with the training set's fields, evaluated every eval_every steps (0: only
  // at the end) in chunks of eval_batch_size samples per worker.
  std::string eval_dataset;
  int64_t eval_every = 0;
  int eval_batch_size = 256;
  int metrics_port = -1;  // -1 off, 0 any free port
  double emulated_slowdown = 1.0;
  std::string slowdown_file;  // polled every step: a number replaces the slowdown
  int64_t collective_timeout_ms = 30000;
  int64_t bucket_elements = 1 << 20;
  std::string sample_log;  // JSON lines of the sample indices of every committed step
  int threads = 1;         // torch intra-op threads
  // Loader threads that gather the next prefetch_steps steps' batches while a step computes
  // (0: load each batch on the training thread when the step needs it).
  int loader_threads = 2;
  int prefetch_steps = 2;
  DeviceKind device = DeviceKind::kAuto;
  int device_index = 0;  // which visible CUDA device
  CollectiveKind collective = CollectiveKind::kAuto;
  // The CPU twin of running out of accelerator memory: a micro-batch larger than this raises
  // the same out-of-memory error a GPU would (0: off). Tests and demos only.
  int emulated_max_micro_batch = 0;
  // All-reduce gradient buckets while backward is still running (DDP-style); false: after it.
  bool overlap = true;
};

}  // namespace fulcrum::trainer
