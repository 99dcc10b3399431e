#include "trainer_image/trainer/trainer_flags.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>

#include "common/command_line.h"

namespace fulcrum::trainer {
namespace {

const std::vector<std::pair<std::string, OptimizerKind>> kOptimizerNames = {
    {"sgd", OptimizerKind::kSgd}, {"adam", OptimizerKind::kAdam}, {"adamw", OptimizerKind::kAdamW}};
const std::vector<std::pair<std::string, ScheduleKind>> kScheduleNames = {
    {"constant", ScheduleKind::kConstant},
    {"cosine", ScheduleKind::kCosine},
    {"step", ScheduleKind::kStep}};
const std::vector<std::pair<std::string, Precision>> kPrecisionNames = {
    {"fp32", Precision::kFloat32}, {"bf16", Precision::kBFloat16}, {"fp16", Precision::kFloat16}};

template <typename Enum>
std::string NameIn(const std::vector<std::pair<std::string, Enum>>& names, Enum value) {
  for (const auto& [name, choice] : names) {
    if (choice == value) return name;
  }
  return "?";
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// The flags, bound to `config`.
void AddFlags(CLI::App& app, TrainerConfig& config) {
  SetFlagDefaults(app);

  const char* membership = "Membership: a coordinator, or a fixed group (tests, benchmarks)";
  app.add_option("--job", config.job, "job name, NAMESPACE/NAME")->group(membership);
  app.add_option("--coordinator", config.coordinator,
                 "HOST:PORT of the coordinator; without it, the static group below")
      ->group(membership);
  app.add_option("--token-file", config.token_file, "file holding the job token (first line)")
      ->group(membership);
  app.add_option("--coordinator-ca", config.coordinator_ca,
                 "CA certificate (PEM) to verify the coordinator's TLS certificate against")
      ->group(membership);
  AddBool(app, "--coordinator-insecure", config.coordinator_insecure,
          "true: talk plaintext to a local coordinator")
      ->group(membership);
  app.add_option("--pod", config.pod, "this trainer's name (default: HOSTNAME-PID)")
      ->group(membership);
  app.add_option("--node", config.node, "the node's name (default: hostname)")->group(membership);
  app.add_option("--gpu-product", config.gpu_product,
                 "the node's GPU product label (a CUDA device's own name wins)")
      ->group(membership);
  app.add_option("--world-size", config.world_size, "static group: number of ranks")
      ->group(membership);
  app.add_option("--rank", config.rank, "static group: this trainer's rank")->group(membership);
  app.add_option("--rendezvous", config.rendezvous,
                 "static group: HOST:PORT where rank 0 serves the store")
      ->group(membership);
  AddList(app, "--batches", config.batches, "static group: every rank's local batch, B0,B1,...")
      ->group(membership);
  app.add_option("--host", config.host, "address the store, Gloo and metrics bind to")
      ->group(membership);

  const char* model = "Model and data";
  AddChoice(app, "--model", config.model.kind,
            {{"mlp", ModelKind::kMlp},
             {"cnn", ModelKind::kCnn},
             {"resnet18", ModelKind::kResNet18},
             {"torchscript", ModelKind::kTorchScript}},
            "what is trained")
      ->group(model);
  app.add_option("--torchscript", config.model.torchscript,
                 "--model torchscript: the module file (the model contract: docs/user-guide.md)")
      ->group(model);
  app.add_option("--dataset", config.data.packed_dir,
                 "a packed dataset: directory of dataset.json and .npy files "
                 "(docs/dataset-format.md)")
      ->group(model);
  app.add_option("--input-field", config.data.input_field,
                 "--dataset: the model's input field (default: the one besides the label)")
      ->group(model);
  app.add_option("--label-field", config.data.label_field,
                 "--dataset: the integer class field of the default loss")
      ->group(model);
  app.add_option("--data-file", config.data.record_file,
                 "--model torchscript: file of fixed-size float32 records")
      ->group(model);
  app.add_option("--record-features", config.data.record_features,
                 "float32 features per record (then one int32 label)")
      ->group(model);
  app.add_option("--dataset-size", config.data.synthetic_size, "samples of a synthetic dataset")
      ->group(model);
  app.add_option("--input-features", config.model.input_features, "MLP input width")->group(model);
  app.add_option("--hidden", config.model.hidden, "MLP hidden width, CNN channels")->group(model);
  app.add_option("--image-size", config.model.image_size, "CNN input is 3 x S x S")->group(model);
  app.add_option("--classes", config.model.classes, "classes of the built-in models")->group(model);
  AddBool(app, "--shuffle", config.shuffle, "a new sample order every epoch")->group(model);
  app.add_option("--seed", config.seed,
                 "seeds the model, the synthetic data, the order and the augmentation")
      ->group(model);

  const char* transform = "Input transforms, on the device";
  app.add_option("--input-scale", config.transform.scale,
                 "integer inputs are multiplied by this (default: 1/255 for uint8, else 1)")
      ->group(transform);
  AddList(app, "--normalize-mean", config.transform.mean, "per-channel mean, M0,M1,...")
      ->group(transform);
  AddList(app, "--normalize-std", config.transform.std, "per-channel std, S0,S1,...")
      ->group(transform);
  app.add_option("--random-crop-padding", config.transform.crop_padding,
                 "images: random crop after zero padding by this many pixels (0: none)")
      ->group(transform);
  AddBool(app, "--horizontal-flip", config.transform.horizontal_flip,
          "images: flip half of them horizontally")
      ->group(transform);

  const char* optimizer = "Optimizer";
  AddChoice(app, "--optimizer", config.optimizer.kind, kOptimizerNames,
            "the update rule, as PyTorch's torch.optim")
      ->group(optimizer);
  app.add_option("--lr", config.optimizer.learning_rate, "learning rate")->group(optimizer);
  AddChoice(app, "--precision", config.precision.precision, kPrecisionNames,
            "forward and loss in float32, or autocast to bfloat16 or float16 (with dynamic loss "
            "scaling) on float32 parameters")
      ->group(optimizer);
  app.add_option("--initial-loss-scale", config.precision.initial_loss_scale,
                 "--precision fp16: the first loss scale")
      ->group(optimizer);
  app.add_option("--loss-scale-growth-interval", config.precision.loss_scale_growth_interval,
                 "--precision fp16: good steps in a row that double the loss scale")
      ->group(optimizer);
  AddBool(app, "--channels-last", config.precision.channels_last,
          "convolution weights and 4-D inputs in the channels_last (NHWC) memory format")
      ->group(optimizer);
  app.add_option("--momentum", config.optimizer.momentum, "SGD momentum")->group(optimizer);
  AddBool(app, "--nesterov", config.optimizer.nesterov, "SGD: Nesterov momentum")->group(optimizer);
  app.add_option("--weight-decay", config.optimizer.weight_decay,
                 "weight decay (L2 for sgd and adam, decoupled for adamw)")
      ->group(optimizer);
  AddChoice(app, "--lr-schedule", config.schedule.kind, kScheduleNames,
            "after warmup: the rate stays, follows a cosine to --lr-final-factor at the last "
            "step, or is multiplied by --lr-gamma every --lr-step-size steps")
      ->group(optimizer);
  app.add_option("--warmup-steps", config.schedule.warmup_steps,
                 "the rate ramps up linearly over these first steps")
      ->group(optimizer);
  app.add_option("--lr-final-factor", config.schedule.final_factor,
                 "cosine: the last step's rate as a fraction of --lr")
      ->group(optimizer);
  app.add_option("--lr-step-size", config.schedule.step_size, "step decay: steps between decays")
      ->group(optimizer);
  app.add_option("--lr-gamma", config.schedule.gamma, "step decay: the factor at each decay")
      ->group(optimizer);
  app.add_option("--max-nonfinite-steps", config.max_nonfinite_steps,
                 "a non-finite loss skips the update; this many in a row end training (exit 3)")
      ->group(optimizer);
  app.add_option("--clip-grad-norm", config.clip_gradient_norm,
                 "clip the aggregated gradient to this global L2 norm; 0 off")
      ->group(optimizer);
  app.add_option("--steps", config.steps, "optimizer steps in total; 0: until stopped")
      ->group(optimizer);
  app.add_option("--epochs", config.epochs,
                 "passes over the dataset in total, the last step partial; 0: off")
      ->group(optimizer);

  const char* state = "State";
  app.add_option("--checkpoint-dir", config.checkpoint_dir, "where checkpoints are written")
      ->group(state);
  app.add_option("--checkpoint-every", config.checkpoint_every,
                 "steps between checkpoints; 0: only on SIGTERM or STOP")
      ->group(state);
  app.add_option("--init-from", config.init_from,
                 "start from these weights (a model.pt or a checkpoint-*.bin) unless "
                 "--checkpoint-dir has a checkpoint to resume")
      ->group(state);
  app.add_option("--output-dir", config.output_dir,
                 "where rank 0 writes model.pt and model.json at the end")
      ->group(state);

  const char* evaluation = "Evaluation";
  app.add_option("--eval-dataset", config.eval_dataset,
                 "a packed dataset with the training set's fields, evaluated by all workers")
      ->group(evaluation);
  app.add_option("--eval-every", config.eval_every, "steps between evaluations; 0: only at the end")
      ->group(evaluation);
  app.add_option("--eval-batch-size", config.eval_batch_size,
                 "samples per forward pass while evaluating")
      ->group(evaluation);

  const char* runtime = "Runtime";
  app.add_option("--metrics-port", config.metrics_port, "Prometheus port; -1 off, 0 any free port")
      ->group(runtime);
  app.add_option("--collective-timeout-ms", config.collective_timeout_ms,
                 "a collective that takes longer fails the step")
      ->group(runtime);
  app.add_option("--bucket-elements", config.bucket_elements, "gradient bucket size, elements")
      ->group(runtime);
  AddBool(app, "--overlap", config.overlap, "all-reduce buckets while backward runs")
      ->group(runtime);
  app.add_option("--threads", config.threads, "torch intra-op threads")->group(runtime);
  app.add_option("--loader-threads", config.loader_threads,
                 "threads that load the next steps' batches during a step (0: load on demand)")
      ->group(runtime);
  app.add_option("--prefetch-steps", config.prefetch_steps,
                 "how many steps ahead the loader threads load")
      ->group(runtime);
  app.add_option("--sample-log", config.sample_log,
                 "file of JSON lines: every committed step's sample indices")
      ->group(runtime);

  const char* device = "Device";
  AddChoice(app, "--device", config.device,
            {{"auto", DeviceKind::kAuto}, {"cpu", DeviceKind::kCpu}, {"cuda", DeviceKind::kCuda}},
            "auto: cuda when a GPU is visible")
      ->group(device);
  app.add_option("--device-index", config.device_index, "which visible CUDA device")->group(device);
  AddChoice(app, "--collective", config.collective,
            {{"auto", CollectiveKind::kAuto},
             {"gloo", CollectiveKind::kGloo},
             {"nccl", CollectiveKind::kNccl}},
            "auto: nccl on cuda, gloo on the CPU")
      ->group(device);

  const char* emulation = "EMULATION (tests and demos only)";
  app.add_option("--emulated-slowdown", config.emulated_slowdown,
                 "sleep (F - 1) x the compute time after each step's compute")
      ->group(emulation);
  app.add_option("--slowdown-file", config.slowdown_file,
                 "a number in it replaces the slowdown (default $FULCRUM_SLOWDOWN_FILE)")
      ->group(emulation);
  app.add_option("--emulated-max-micro-batch", config.emulated_max_micro_batch,
                 "larger micro-batches fail as out of memory; 0 off")
      ->group(emulation);
  app.add_option("--emulated-read-us-per-sample", config.data.emulated_read_microseconds_per_sample,
                 "slow storage: every read sleeps this long per sample; 0 off")
      ->group(emulation);
}

constexpr const char* kDescription =
    "fulcrum-trainer: heterogeneous data-parallel training with in-place rebalancing.\n"
    "Joins a coordinator (--coordinator, --token-file, --coordinator-ca or "
    "--coordinator-insecure true)\n"
    "or a fixed group (--world-size, --rank, --rendezvous, --batches).";

Status Validate(const TrainerConfig& config) {
  if (config.coordinator.empty()) {
    if (config.world_size < 1) return InvalidArgument("--world-size", "must be >= 1");
    if (config.rank < 0 || config.rank >= config.world_size) {
      return InvalidArgument("--rank", "must be in [0, --world-size)");
    }
    if (config.rendezvous.find(':') == std::string::npos) {
      return InvalidArgument("--rendezvous", "is required without --coordinator: HOST:PORT");
    }
    if (static_cast<int>(config.batches.size()) != config.world_size) {
      return InvalidArgument("--batches", "needs one local batch per rank (--world-size of them)");
    }
    for (int batch : config.batches) {
      if (batch < 0) return InvalidArgument("--batches", "batches must be >= 0");
    }
  } else if (config.token_file.empty()) {
    return InvalidArgument("--token-file", "is required with --coordinator");
  } else if (config.coordinator_ca.empty() == !config.coordinator_insecure) {
    return InvalidArgument("--coordinator-ca",
                           config.coordinator_insecure
                               ? "and --coordinator-insecure true exclude each other"
                               : "is required with --coordinator: the CA file to verify the "
                                 "coordinator's TLS certificate against (the operator mounts it "
                                 "beside the token), or --coordinator-insecure true for a local "
                                 "plaintext coordinator");
  }
  const ModelOptions& model = config.model;
  const DatasetOptions& data = config.data;
  if (!data.packed_dir.empty() && !data.record_file.empty())
    return InvalidArgument("--dataset", "and --data-file exclude each other");
  if (!data.record_file.empty() && data.record_features < 1)
    return InvalidArgument("--record-features", "is required with --data-file (>= 1)");
  if (model.kind == ModelKind::kTorchScript &&
      (model.torchscript.empty() || (data.record_file.empty() && data.packed_dir.empty()))) {
    return InvalidArgument("--model",
                           "torchscript needs --torchscript and data: --dataset, or --data-file "
                           "with --record-features");
  }
  if (config.epochs < 0) return InvalidArgument("--epochs", "must be >= 0");
  if (config.epochs > 0 && config.steps > 0)
    return InvalidArgument("--epochs", "and --steps exclude each other: set one");
  if (config.data.synthetic_size < 1) return InvalidArgument("--dataset-size", "must be >= 1");
  if (model.input_features < 1 || model.hidden < 1 || model.classes < 2 || model.image_size < 4) {
    return InvalidArgument("--input-features/--hidden/--classes/--image-size",
                           "must be >= 1, >= 1, >= 2 and >= 4");
  }
  if (!(config.optimizer.learning_rate > 0.0)) return InvalidArgument("--lr", "must be > 0");
  if (!(config.optimizer.momentum >= 0.0 && config.optimizer.momentum < 1.0))
    return InvalidArgument("--momentum", "must be in [0, 1)");
  if (config.optimizer.nesterov &&
      (config.optimizer.kind != OptimizerKind::kSgd || !(config.optimizer.momentum > 0.0))) {
    return InvalidArgument("--nesterov", "needs --optimizer sgd and --momentum > 0");
  }
  if (!(config.optimizer.weight_decay >= 0.0 && config.optimizer.weight_decay < 1.0))
    return InvalidArgument("--weight-decay", "must be in [0, 1)");
  if (!(config.clip_gradient_norm >= 0.0) || std::isinf(config.clip_gradient_norm))
    return InvalidArgument("--clip-grad-norm", "must be a finite number >= 0 (0: off)");
  if (Status status = ValidateSchedule(config.schedule); !status.ok()) return status;
  if (config.max_nonfinite_steps < 1)
    return InvalidArgument("--max-nonfinite-steps", "must be >= 1");
  if (config.steps < 0) return InvalidArgument("--steps", "must be >= 0");
  if (!(config.precision.initial_loss_scale >= 1.0) ||
      std::isinf(config.precision.initial_loss_scale)) {
    return InvalidArgument("--initial-loss-scale", "must be a finite number >= 1");
  }
  if (config.precision.loss_scale_growth_interval < 1)
    return InvalidArgument("--loss-scale-growth-interval", "must be >= 1");
  if (config.eval_every < 0) return InvalidArgument("--eval-every", "must be >= 0");
  if (config.eval_every > 0 && config.eval_dataset.empty())
    return InvalidArgument("--eval-every", "needs --eval-dataset");
  if (config.eval_batch_size < 1) return InvalidArgument("--eval-batch-size", "must be >= 1");
  if (config.checkpoint_every < 0) return InvalidArgument("--checkpoint-every", "must be >= 0");
  if (config.checkpoint_every > 0 && config.checkpoint_dir.empty()) {
    return InvalidArgument("--checkpoint-dir", "is required with --checkpoint-every");
  }
  if (config.metrics_port < -1 || config.metrics_port > 65535) {
    return InvalidArgument("--metrics-port", "must be -1 (off) or a port in [0, 65535]");
  }
  if (!(config.emulated_slowdown >= 1.0 && config.emulated_slowdown <= 100.0)) {
    return InvalidArgument("--emulated-slowdown", "must be in [1, 100]");
  }
  if (config.collective_timeout_ms < 100)
    return InvalidArgument("--collective-timeout-ms", "must be >= 100");
  if (config.bucket_elements < 1024) return InvalidArgument("--bucket-elements", "must be >= 1024");
  if (config.threads < 1) return InvalidArgument("--threads", "must be >= 1");
  if (config.loader_threads < 0 || config.loader_threads > 64)
    return InvalidArgument("--loader-threads", "must be in [0, 64]");
  if (config.prefetch_steps < 1 || config.prefetch_steps > 64)
    return InvalidArgument("--prefetch-steps", "must be in [1, 64]");
  if (config.device_index < 0) return InvalidArgument("--device-index", "must be >= 0");
  if (config.device == DeviceKind::kCpu && config.collective == CollectiveKind::kNccl) {
    return InvalidArgument("--collective", "nccl needs --device cuda; use gloo on the CPU");
  }
  if (config.data.emulated_read_microseconds_per_sample < 0 ||
      config.data.emulated_read_microseconds_per_sample > 1000000)
    return InvalidArgument("--emulated-read-us-per-sample", "must be in [0, 1000000] (0: off)");
  if (config.emulated_max_micro_batch < 0)
    return InvalidArgument("--emulated-max-micro-batch", "must be >= 0 (0: off)");
  return Ok();
}

// What the layers take from flags that belong to another layer.
void ShareAcrossLayers(TrainerConfig& config) {
  config.model.seed = config.seed;
  config.data.seed = config.seed;
  config.transform.seed = config.seed;
  config.data.classes = config.model.classes;
  config.data.synthetic_shape =
      config.model.kind == ModelKind::kMlp
          ? std::vector<int64_t>{config.model.input_features}
          : std::vector<int64_t>{3, config.model.image_size, config.model.image_size};
}

}  // namespace

Result<TrainerConfig> ParseTrainerFlags(const std::vector<std::string>& args,
                                        const std::map<std::string, std::string>& environment) {
  TrainerConfig config;
  if (const auto file = environment.find("FULCRUM_SLOWDOWN_FILE"); file != environment.end()) {
    config.slowdown_file = file->second;
  }
  if (const auto image = environment.find("FULCRUM_IMAGE"); image != environment.end()) {
    config.image = image->second;
  }
  CLI::App app{kDescription, "fulcrum-trainer"};
  AddFlags(app, config);
  Result<CommandLine> parsed = ParseCommandLine(app, args);
  if (!parsed.ok()) return parsed.error();
  if (*parsed == CommandLine::kHelpAsked) return InvalidArgument("--help", app.help());
  if (config.node.empty()) config.node = Hostname();
  if (config.pod.empty()) config.pod = Hostname() + "-" + std::to_string(getpid());
  if (Status status = Validate(config); !status.ok()) return status.error();
  ShareAcrossLayers(config);
  return config;
}

std::string NameOf(OptimizerKind kind) {
  return NameIn(kOptimizerNames, kind);
}
std::string NameOf(ScheduleKind kind) {
  return NameIn(kScheduleNames, kind);
}
std::string NameOf(Precision precision) {
  return NameIn(kPrecisionNames, precision);
}

}  // namespace fulcrum::trainer
