// A HeteroTrainingJob's spec as the controller uses it. The API server has already applied the
// CRD's defaults and refused what its schema and CEL rules forbid (crds/), so parsing only
// reads; it still checks the fields it depends on, naming them, because an object can reach
// the controller from an older CRD version or a hand-made test.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "operator/controller/node_inventory.h"
#include "operator/controller/pod_template.h"

namespace fulcrum::controller {

// dataset.packed: a packed dataset directory (docs/dataset-format.md) and the transforms its
// inputs get on the device.
struct PackedDatasetSpec {
  std::string path;
  std::string input_field;  // empty: the one field besides the label
  std::string label_field;  // empty: the trainer's default, "label"
  std::optional<double> scale;
  std::vector<double> mean;
  std::vector<double> std;
  int64_t crop_padding = 0;
  bool horizontal_flip = false;
};

// spec.runtime: what runs in the trainer container.
enum class Runtime {
  kTrainer,  // fulcrum-trainer with the spec's model, data and recipe (the operator's flags)
  kPython,   // the user's own script (spec.command) with the fulcrum Python package, which
             // reads the job from FULCRUM_* variables; model, dataset and recipe are its own
};

struct JobSpec {
  std::string ns;
  std::string name;
  std::string uid;
  int64_t generation = 0;

  Runtime runtime = Runtime::kTrainer;
  std::string image;  // empty: the operator's default trainer image
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  PodTemplate pod_template;  // spec.template

  std::string builtin_model;  // mlp, cnn, resnet18; empty with a TorchScript model
  std::string torchscript_path;
  int64_t synthetic_samples = 4096;
  int64_t seed = 1;
  std::string record_file;
  int64_t features_per_record = 0;
  PackedDatasetSpec packed;  // dataset.packed; path empty when absent

  int global_batch = 0;
  int min_replicas = 1;
  int max_replicas = 1;
  int gpus_per_worker = 1;
  GpuSelector gpu_selector;
  std::map<std::string, int> max_workers_per_product;

  std::string policy = "optimal";
  double min_gain = 0.05;
  int interval_steps = 50;
  // spec.batching: adaptive lets the coordinator choose B in [min, max] (docs/adaptive-batch.md).
  struct Batching {
    std::string mode = "fixed";
    int min = 0;
    int max = 0;
    std::string learning_rate_scaling = "adaScale";
    int64_t min_steps_between_changes = 100;
    double max_factor = 4.0;
  } batching;

  std::optional<int64_t> steps;
  std::optional<int64_t> epochs;
  std::string optimizer = "sgd";
  double learning_rate = 0.05;
  std::optional<double> momentum;
  bool nesterov = false;
  double weight_decay = 0.0;
  std::optional<double> gradient_clip_norm;
  std::string precision = "fp32";
  bool channels_last = false;
  // training.schedule; kind empty when absent.
  struct Schedule {
    std::string kind;
    int64_t warmup_steps = 0;
    std::optional<double> final_factor;
    int64_t step_size = 0;
    std::optional<double> gamma;
  } schedule;

  std::string checkpoint_path;
  int64_t checkpoint_every = 0;
  std::string init_from;    // spec.initFrom.path: weights of step 0
  std::string output_path;  // spec.output.path: where model.pt and model.json go
  // spec.evaluation; dataset empty when absent.
  struct Evaluation {
    std::string dataset;
    int64_t every_steps = 0;
    int batch_size = 0;
  } evaluation;
  bool suspend = false;
  int backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;

  // The coordinator's name for the job: unique across namespaces.
  std::string CoordinatorJobName() const { return ns + "/" + name; }
};

Result<JobSpec> ParseJobSpec(const nlohmann::json& job);

}  // namespace fulcrum::controller
