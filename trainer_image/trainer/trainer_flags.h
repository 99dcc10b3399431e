// fulcrum-trainer's command line, parsed and validated; errors name the flag and the fix.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace fulcrum::trainer {

enum class ModelKind { kMlp, kCnn, kResNet18, kTorchScript };
enum class OptimizerKind { kSgd, kAdam };
enum class DeviceKind { kAuto, kCpu, kCuda };       // auto: cuda when a GPU is visible
enum class CollectiveKind { kAuto, kGloo, kNccl };  // auto: nccl on cuda, gloo on the CPU

struct TrainerFlags {
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
  std::string gpu_product = "cpu";
  int rank = 0;                    // static group only
  int world_size = 1;              // static group only
  std::string rendezvous;          // static group only: host:port; rank 0 serves the store there
  std::vector<int> batches;        // static group only: every rank's local batch
  std::string host = "127.0.0.1";  // address its store, Gloo transport and metrics bind to

  // What is trained.
  ModelKind model = ModelKind::kMlp;
  std::string torchscript;      // --model torchscript: module file (forward(x) -> logits)
  std::string data_file;        // --model torchscript: file of fixed-size records
  int record_features = 0;      // float32 features per record (then one int32 label)
  int64_t dataset_size = 4096;  // synthetic datasets
  int input_features = 32;      // MLP input width
  int hidden = 64;              // MLP hidden width, CNN channels
  int image_size = 8;           // CNN input is 3 x image_size x image_size
  int classes = 10;
  bool shuffle = true;
  uint64_t seed = 1;

  OptimizerKind optimizer = OptimizerKind::kSgd;
  double learning_rate = 0.05;
  double momentum = 0.9;
  int64_t steps = 0;  // stop after this many optimizer steps in total; 0 = run until stopped

  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;  // steps; 0 = only on SIGTERM / STOP
  int metrics_port = -1;         // -1 off, 0 any free port
  double emulated_slowdown = 1.0;
  std::string slowdown_file;  // polled every step: a number replaces the slowdown
  int64_t collective_timeout_ms = 30000;
  int64_t bucket_elements = 1 << 20;
  std::string sample_log;  // JSON lines of the sample indices of every committed step
  int threads = 1;         // torch intra-op threads
  DeviceKind device = DeviceKind::kAuto;
  int device_index = 0;  // which visible CUDA device
  CollectiveKind collective = CollectiveKind::kAuto;
  // The CPU twin of running out of accelerator memory: a micro-batch larger than this raises
  // the same out-of-memory error a GPU would (0: off). Tests and demos only.
  int emulated_max_micro_batch = 0;
  // All-reduce gradient buckets while backward is still running (DDP-style); false: after it.
  bool overlap = true;
};

extern const char* const kTrainerUsage;

// `environment` supplies defaults that flags override: FULCRUM_SLOWDOWN_FILE sets
// --slowdown-file (fulcrum-local-node gives every container its node's file).
Result<TrainerFlags> ParseTrainerFlags(const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& environment = {});

}  // namespace fulcrum::trainer
