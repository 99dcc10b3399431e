#include "trainer_image/trainer/loop/training_loop.h"

#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>
#include <thread>

#include "common/log.h"
#include "trainer_image/trainer/collective/connect_collective.h"
#include "trainer_image/trainer/collective/gradient_buckets.h"
#include "trainer_image/trainer/collective/rendezvous_store.h"
#include "trainer_image/trainer/data/batch_loader.h"
#include "trainer_image/trainer/data/dataset.h"
#include "trainer_image/trainer/data/device_transform.h"
#include "trainer_image/trainer/data/field_roles.h"
#include "trainer_image/trainer/data/sample_order.h"
#include "trainer_image/trainer/device/compute_device.h"
#include "trainer_image/trainer/device/cpu_allocator.h"
#include "trainer_image/trainer/device/cpu_threads.h"
#include "trainer_image/trainer/device/emulated_slowdown.h"
#include "trainer_image/trainer/loop/model_record.h"
#include "trainer_image/trainer/loop/model_runner.h"
#include "trainer_image/trainer/loop/trainer_metrics.h"
#include "trainer_image/trainer/membership/coordinator_link.h"
#include "trainer_image/trainer/model/loss_scaler.h"
#include "trainer_image/trainer/model/model.h"
#include "trainer_image/trainer/model/optimizer.h"
#include "trainer_image/trainer/state/checkpoint_file.h"
#include "trainer_image/trainer/state/training_state.h"

namespace fulcrum::trainer {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kWaitSlice = std::chrono::milliseconds(200);
constexpr int kLogEvery = 10;

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// GPU Feature Discovery labels spell the product with dashes where CUDA has spaces.
std::string AsProductLabel(std::string name) {
  std::replace(name.begin(), name.end(), ' ', '-');
  return name;
}

// The small vector all-reduced with the gradients every step, at the end of the last gradient
// bucket (gradient_buckets.h). It carries what the ranks must agree on after the step, so they
// all act on the same step: the batch sum B, the loss, whether to leave the generation, whether
// to checkpoint, and rank 0's plan for the next step.
struct ControlLayout {
  static constexpr std::size_t kBatch = 0;
  static constexpr std::size_t kLossSum = 1;
  static constexpr std::size_t kLeave = 2;
  static constexpr std::size_t kCheckpoint = 3;
  static constexpr std::size_t kAccumulation = 4;
  // Rank 0's live-edited recipe for the next step (0: unchanged), each value as two float32
  // (the slots are float32): the learning rate as its float and the remainder, the total steps
  // in units of 2^24 and the rest, the sample efficiency (Assignment.sample_efficiency) as the
  // learning rate.
  static constexpr std::size_t kLearningRate = 5;      // and kLearningRate + 1
  static constexpr std::size_t kTotalSteps = 7;        // and kTotalSteps + 1
  static constexpr std::size_t kSampleEfficiency = 9;  // and kSampleEfficiency + 1
  static constexpr std::size_t kPlan = 11;             // world_size entries follow
  static std::size_t Size(int world_size) { return kPlan + static_cast<std::size_t>(world_size); }
};

// A double in two float32 control slots, exact to about 48 bits: every rank decodes the same.
void EncodeInTwoSlots(double value, std::vector<double>& control, std::size_t slot) {
  const auto high = static_cast<float>(value);
  control[slot] = high;
  control[slot + 1] = static_cast<float>(value - static_cast<double>(high));
}
double DecodeFromTwoSlots(const std::vector<double>& control, std::size_t slot) {
  return control[slot] + control[slot + 1];
}
constexpr double kStepsUnit = 16777216.0;  // 2^24: float32 holds integers exactly below it

// An Assignment's sample efficiency: 0 (unset, a fixed global batch) is 1, and so is a value
// no coordinator sends (not finite or negative), which would end an epoch job at once or never.
double SampleEfficiencyOf(const fulcrum::v1::Assignment& assignment) {
  const double efficiency = assignment.sample_efficiency();
  return std::isfinite(efficiency) && efficiency > 0.0 ? efficiency : 1.0;
}

// kFatal: the model or data failed a step (exit 1); kInvalidInput: the job's input cannot be
// trained as given (exit 2, which the operator does not retry).
enum class GenerationEnd { kFinished, kLeft, kFellOut, kFatal, kInvalidInput };

class Trainer {
 public:
  Trainer(TrainerConfig config, const std::atomic<int>& stop_signal)
      : config_(std::move(config)),
        stop_signal_(stop_signal),
        slowdown_(config_.emulated_slowdown, config_.slowdown_file),
        base_learning_rate_(config_.optimizer.learning_rate),
        steps_(config_.steps) {}

  Status Init();
  int Run();

 private:
  ModelOptions ModelFor(const Dataset& dataset) const;
  // The trained parameters (requires_grad), after checking every parameter's dtype.
  Status CollectParameters();
  // Names every tensor of the state (parameters, buffers, optimizer) for checkpoints.
  void CollectState(const std::vector<std::string>& trained_names);
  // float16's loss scaler; the warning that a CPU keeps float32 compute for it.
  void SetUpLossScaling();
  // Resumes from the newest checkpoint, or else starts from --init-from's weights.
  Status RestoreStartingPoint();
  // Opens --eval-dataset and checks its fields are the training set's.
  Status OpenEvaluationSet();
  // Every rank evaluates a disjoint shard of the evaluation set, sized by its local batch in
  // `batches` so the slowest is not held up; the sums are all-reduced, so the result is one
  // process's on the whole set. Rank 0 reports it. Collective errors: the generation ends.
  Status Evaluate(Collective& collective, const std::vector<int>& batches, int64_t generation);
  // Rank 0 at the end: the trained module (model.pt) and what produced it (model.json).
  void WriteOutput(const char* why);
  GenerationEnd RunGeneration(const fulcrum::v1::Assignment& assignment);
  Status SyncState(Collective& collective);
  Result<bool> TrainStep(Collective& collective, const fulcrum::v1::Assignment& base,
                         fulcrum::v1::Assignment& plan);
  // Returns the loss sum, a 0-dim float64 tensor on the device (read without waiting for
  // backward: ComputeDevice::DeferToHost); `failed_micro_batch` is the largest micro-batch
  // that ran out of memory on the way (0: none).
  Result<torch::Tensor> ForwardBackward(Collective& collective, const Batch& batch,
                                        const BatchRequest& request, int planned_micro_steps,
                                        int& failed_micro_batch);
  torch::Tensor ForwardBackwardOnce(const Batch& batch, const BatchRequest& request,
                                    int micro_steps);
  // This rank's samples of the step that starts at `cursor` under `batches`; the last step of
  // the last epoch is partial (no rank trains past the last position).
  Result<BatchRequest> RequestAt(int64_t cursor, const std::vector<int>& batches);
  // Tells the loader the batches of the next steps, assuming `batches` stays the plan.
  void PrefetchFrom(int64_t cursor, const std::vector<int>& batches);
  // The job's steps: --steps, or for --epochs this step plus the steps left at the current
  // global batch (the same on every rank: the cursor and the batch are agreed), else 0.
  int64_t TotalSteps(int64_t global_batch) const {
    if (steps_ > 0) return steps_;
    if (config_.epochs <= 0 || global_batch <= 0) return 0;
    const int64_t left = EndPosition() - progress_.cursor;
    return progress_.step + (left + global_batch - 1) / global_batch;
  }
  // Every epoch's samples (--epochs), counted in equivalent samples (Progress).
  int64_t LastPosition() const { return config_.epochs * dataset_->size(); }
  // The equivalent samples still to train for --epochs. Under half a sample is none: the sum
  // of products of batches and efficiencies rounds, and a fixed B's sums are whole numbers.
  double EquivalentSamplesLeft() const {
    const double left = static_cast<double>(LastPosition()) - progress_.equivalent_samples;
    return left < 0.5 ? 0.0 : left;
  }
  // The cursor at which an --epochs job ends if the sample efficiency stays: every epoch's
  // samples under a fixed B; later for a larger adaptive B, whose samples are each worth less.
  // The last step is cut there (partial), so the job trains no sample past its end.
  int64_t EndPosition() const {
    return progress_.cursor +
           static_cast<int64_t>(std::ceil(EquivalentSamplesLeft() / sample_efficiency_));
  }
  // Done: the steps are taken, or every epoch's equivalent samples are.
  bool Finished() const {
    return (steps_ > 0 && progress_.step >= steps_) ||
           (config_.epochs > 0 && EquivalentSamplesLeft() == 0.0);
  }
  void WriteCheckpointNow(const char* why);
  void HandleControls();
  bool WantsToLeave(int64_t generation) const;
  void LogFinished(const char* why);
  const std::string& job() const { return config_.job; }

  TrainerConfig config_;
  const std::atomic<int>& stop_signal_;
  EmulatedSlowdown slowdown_;
  std::unique_ptr<ComputeDevice> compute_;
  CollectiveKind collective_kind_ = CollectiveKind::kGloo;
  // Learned from out-of-memory errors: the largest micro-batch this device has been seen to
  // fail at, minus one (max(): none seen). Steps split their batch so no micro-step exceeds it.
  int micro_batch_limit_ = std::numeric_limits<int>::max();
  std::unique_ptr<TrainingModel> model_;
  std::unique_ptr<Dataset> dataset_;
  std::unique_ptr<Dataset> eval_dataset_;
  // The last evaluation (step -1: none yet), for model.json.
  fulcrum::v1::Evaluation last_evaluation_;
  FieldRoles roles_;
  std::optional<ModelRunner> runner_;  // the batch through the model (model_runner.h)
  std::unique_ptr<BatchLoader> loader_;
  std::unique_ptr<Optimizer> optimizer_;
  // The recipe as edited live through the coordinator (Assignment.learning_rate, .total_steps):
  // --lr and --steps until then. Agreed in band, so every rank changes at the same step.
  double base_learning_rate_ = 0.0;
  int64_t steps_ = 0;
  // Assignment.sample_efficiency of the running plan (1: a fixed global batch): each step adds
  // its global batch times this to Progress::equivalent_samples. Agreed in band too.
  double sample_efficiency_ = 1.0;
  // Takes a live-edited recipe from an Assignment or the summed control; logs a change.
  void AdoptRecipe(double learning_rate, int64_t total_steps, double sample_efficiency,
                   const char* how);
  std::optional<LossScaler> loss_scaler_;  // --precision fp16
  int64_t overflow_steps_ = 0;             // steps skipped for a gradient overflow
  std::unique_ptr<SampleOrder> order_;
  std::vector<NamedTensor> named_parameters_;  // every parameter, trained or frozen
  std::vector<torch::Tensor> parameters_;      // the trained ones: all-reduced and updated
  std::vector<torch::Tensor> model_tensors_;   // every parameter and buffer
  std::vector<StateTensor> state_;             // parameters, buffers, optimizer state, named
  std::vector<torch::Tensor> state_tensors_;   // state_'s tensors, as broadcast to newcomers
  std::unique_ptr<GradientBuckets> buckets_;
  Progress progress_;
  std::unique_ptr<StoreServer> store_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<TrainerMetrics> metrics_;
  std::ofstream sample_log_;
  bool stop_requested_ = false;   // Control STOP
  bool drain_requested_ = false;  // Control DRAIN
  bool checkpoint_requested_ = false;
  int rank_ = 0;
  int nonfinite_steps_ = 0;  // steps in a row whose loss was not finite (their update skipped)
  double last_loss_ = std::numeric_limits<double>::quiet_NaN();
  struct {
    int64_t samples = 0;
    double step_seconds = 0.0;
    double coordinator_seconds = 0.0;  // time the step spent talking to the coordinator
    double data_wait_seconds = 0.0;    // time steps waited for their batches
  } totals_;
};

// A built-in model trained on a packed dataset takes its shape from the data: the MLP's input
// width, the CNNs' image size, and the classes dataset.json declares for the label.
ModelOptions Trainer::ModelFor(const Dataset& dataset) const {
  ModelOptions options = config_.model;
  if (options.kind == ModelKind::kTorchScript || config_.data.packed_dir.empty() || !roles_.input)
    return options;
  const std::vector<int64_t>& shape = dataset.fields()[*roles_.input].shape;
  int64_t features = 1;
  for (int64_t dimension : shape) features *= dimension;
  options.input_features = static_cast<int>(features);
  if (shape.size() == 3) options.image_size = static_cast<int>(shape[1]);
  if (roles_.label) {
    if (const std::optional<int64_t> classes = dataset.fields()[*roles_.label].classes)
      options.classes = static_cast<int>(*classes);
  }
  log::Info("trainer", job(), "the built-in model follows the dataset",
            {{"input_features", options.input_features},
             {"image_size", options.image_size},
             {"classes", options.classes}});
  return options;
}

Status Trainer::Init() {
  KeepFreedCpuMemory(job());
  SetCpuMathThreads(config_.threads, job());
  Result<std::unique_ptr<ComputeDevice>> compute = OpenComputeDevice(
      config_.device, config_.device_index, DeviceWhere(config_.node, config_.image));
  if (!compute.ok()) return compute.error();
  compute_ = std::move(*compute);
  const bool on_cuda = compute_->device().is_cuda();
  collective_kind_ = config_.collective;
  if (collective_kind_ == CollectiveKind::kAuto)
    collective_kind_ = on_cuda ? CollectiveKind::kNccl : CollectiveKind::kGloo;
  if (collective_kind_ == CollectiveKind::kNccl && !on_cuda) {
    return InvalidArgument("--collective", "nccl needs a CUDA device (--device cuda); use gloo");
  }
  Result<std::unique_ptr<Dataset>> dataset = MakeDataset(config_.data);
  if (!dataset.ok()) return dataset.error();
  dataset_ = std::move(*dataset);
  Result<FieldRoles> roles = AssignFieldRoles(*dataset_, config_.data);
  if (!roles.ok()) return roles.error();
  roles_ = *roles;
  Result<std::unique_ptr<TrainingModel>> model = MakeModel(ModelFor(*dataset_));
  if (!model.ok()) return model.error();
  model_ = std::move(*model);
  model_->To(compute_->device());
  if (Status status = model_->Bind(dataset_->fields(), roles_); !status.ok()) return status;
  if (Status status = CollectParameters(); !status.ok()) return status;
  if (!model_->HasLoss()) {
    if (Status status = CheckClassLabel(*dataset_, roles_, config_.data); !status.ok())
      return status;
  }
  Result<ModelRunner> runner =
      ModelRunner::Make(*model_, *dataset_, roles_, config_, compute_->device());
  if (!runner.ok()) return runner.error();
  runner_.emplace(std::move(*runner));
  if (config_.model.kind == ModelKind::kTorchScript) {
    if (Status status = runner_->Probe(*dataset_); !status.ok()) return status;
  }
  SetUpLossScaling();
  if (Status status = OpenEvaluationSet(); !status.ok()) return status;
  last_evaluation_.set_step(-1);
  loader_ = std::make_unique<BatchLoader>(*dataset_, *compute_, config_.loader_threads);
  if (config_.epochs > 0) {
    log::Info("trainer", job(), "training for epochs",
              {{"epochs", config_.epochs},
               {"samples_per_epoch", dataset_->size()},
               {"last_position", LastPosition()}});
  }
  order_ = std::make_unique<SampleOrder>(dataset_->size(), config_.seed, config_.shuffle);
  std::vector<torch::Tensor> buffers;
  for (const NamedTensor& buffer : model_->NamedBuffers()) buffers.push_back(buffer.tensor);
  // The buckets live on the compute device; NCCL reduces them there, Gloo in host memory (GPU
  // buckets staged through a pinned mirror). Buffers are averaged in them.
  buckets_ = std::make_unique<GradientBuckets>(
      parameters_, config_.bucket_elements, compute_->device(), buffers,
      collective_kind_ == CollectiveKind::kNccl ? CollectiveMemory::kBufferDevice
                                                : CollectiveMemory::kHost);
  optimizer_ = MakeOptimizer(config_.optimizer, parameters_);
  std::vector<std::string> trained_names;
  for (const NamedTensor& parameter : named_parameters_) {
    if (parameter.tensor.requires_grad()) trained_names.push_back(parameter.name);
  }
  CollectState(trained_names);
  if (Status status = RestoreStartingPoint(); !status.ok()) return status;
  if (!config_.sample_log.empty()) {
    sample_log_.open(config_.sample_log, std::ios::app);
    if (!sample_log_) return InvalidArgument("--sample-log", "cannot open " + config_.sample_log);
  }
  Result<std::unique_ptr<TrainerMetrics>> metrics =
      TrainerMetrics::Start(config_.host, config_.metrics_port, job(), config_.pod);
  if (!metrics.ok()) return metrics.error();
  metrics_ = std::move(*metrics);
  if (config_.emulated_slowdown != 1.0 || !config_.slowdown_file.empty()) {
    log::Info("trainer", job(), "EMULATION: compute is slowed down artificially (tests/demos only)",
              {{"emulation", true},
               {"factor", config_.emulated_slowdown},
               {"file", config_.slowdown_file}});
  }

  if (config_.coordinator.empty()) {
    // A fixed group: rank 0 serves the store at the rendezvous address.
    if (config_.rank == 0) {
      const auto colon = config_.rendezvous.rfind(':');
      Result<std::unique_ptr<StoreServer>> store = StoreServer::Start(
          config_.rendezvous.substr(0, colon), std::stoi(config_.rendezvous.substr(colon + 1)));
      if (!store.ok()) return store.error();
      store_ = std::move(*store);
    }
    fulcrum::v1::Assignment assignment;
    assignment.set_generation(1);
    assignment.set_rank(config_.rank);
    assignment.set_world_size(config_.world_size);
    assignment.set_rendezvous_address(config_.rendezvous);
    for (int batch : config_.batches) assignment.add_batches(batch);
    assignment.set_local_batch(config_.batches[static_cast<std::size_t>(config_.rank)]);
    assignment.set_global_batch(std::accumulate(config_.batches.begin(), config_.batches.end(), 0));
    assignment.set_accumulation_steps(1);
    assignment.set_reason("static group from the command line");
    membership_ = std::make_unique<StaticMembership>(std::move(assignment));
  } else {
    Result<std::unique_ptr<StoreServer>> store = StoreServer::Start(config_.host, 0);
    if (!store.ok()) return store.error();
    store_ = std::move(*store);
    std::ifstream token_file(config_.token_file);
    std::string token;
    if (!(token_file >> token))
      return InvalidArgument("--token-file", "cannot read a token from " + config_.token_file);
    CoordinatorLinkOptions options;
    options.address = config_.coordinator;
    if (config_.coordinator_insecure) {
      log::Warn("trainer", job(), "the coordinator link is plaintext (--coordinator-insecure)",
                {{"coordinator", config_.coordinator}});
    } else {
      std::ifstream ca_file(config_.coordinator_ca);
      options.root_certificates.assign(std::istreambuf_iterator<char>(ca_file), {});
      if (options.root_certificates.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
        return InvalidArgument("--coordinator-ca",
                               "no PEM certificate in " + config_.coordinator_ca);
      }
    }
    options.hello.set_job(config_.job);
    options.hello.set_pod(config_.pod);
    options.hello.set_node(config_.node);
    // The device's own name and memory where there is one; the node's label otherwise.
    std::string product = config_.gpu_product;
    if (!compute_->product().empty()) {
      const std::string reported = AsProductLabel(compute_->product());
      if (product != "cpu" && !product.empty() && product != reported) {
        log::Warn("trainer", job(), "--gpu-product differs from the device; using the device's",
                  {{"flag", product}, {"device", reported}});
      }
      product = reported;
    }
    options.hello.set_gpu_product(product);
    options.hello.set_gpu_memory(compute_->memory_bytes());
    options.hello.set_token(token);
    options.hello.set_store_address(store_->address());
    options.hello.set_step(progress_.step);
    membership_ = std::make_unique<CoordinatorLink>(std::move(options));
  }
  log::Info("trainer", job(), "started",
            {{"pod", config_.pod},
             {"device", compute_->device().str()},
             {"device_product", compute_->product()},
             {"collective", collective_kind_ == CollectiveKind::kNccl ? "nccl" : "gloo"},
             {"parameters", buckets_->elements()},
             {"frozen_parameters", static_cast<int>(named_parameters_.size() - parameters_.size())},
             {"buffers", static_cast<int>(model_tensors_.size() - named_parameters_.size())},
             {"custom_loss", model_->HasLoss()},
             {"gradient_buckets", buckets_->bucket_count()},
             {"overlap", config_.overlap},
             {"step", progress_.step},
             {"metrics_port", metrics_->port()},
             {"pid", static_cast<int>(getpid())}});
  return Ok();
}

Status Trainer::CollectParameters() {
  named_parameters_ = model_->NamedParameters();
  const bool scripted = config_.model.kind == ModelKind::kTorchScript;
  for (const NamedTensor& parameter : named_parameters_) {
    if (parameter.tensor.scalar_type() != torch::kFloat32) {
      return InvalidArgument(
          scripted ? "--torchscript" : "--model",
          "parameter " + parameter.name + " is " + c10::toString(parameter.tensor.scalar_type()) +
              ": fulcrum-trainer keeps and updates float32 parameters. Save the module after "
              "module.float(); lower precision is for the computation, not the stored weights");
    }
    if (!parameter.tensor.is_contiguous() &&
        !parameter.tensor.is_contiguous(at::MemoryFormat::ChannelsLast)) {
      return InvalidArgument(scripted ? "--torchscript" : "--model",
                             "parameter " + parameter.name + " is not contiguous");
    }
    if (parameter.tensor.requires_grad()) parameters_.push_back(parameter.tensor);
  }
  if (parameters_.empty()) {
    return InvalidArgument(scripted ? "--torchscript" : "--model",
                           "no parameter has requires_grad=True: there is nothing to train (a "
                           "frozen parameter is neither all-reduced nor updated)");
  }
  return Ok();
}

void Trainer::CollectState(const std::vector<std::string>& trained_names) {
  for (const NamedTensor& parameter : named_parameters_) {
    state_.push_back({"parameter", parameter.name, parameter.tensor});
  }
  for (const NamedTensor& buffer : model_->NamedBuffers()) {
    state_.push_back({"buffer", buffer.name, buffer.tensor});
  }
  for (const StateTensor& entry : state_) model_tensors_.push_back(entry.tensor);
  const std::vector<torch::Tensor> optimizer_state = optimizer_->State();
  const std::vector<std::string> optimizer_names = optimizer_->StateNames(trained_names);
  for (std::size_t i = 0; i < optimizer_state.size(); ++i) {
    state_.push_back({"optimizer", optimizer_names[i], optimizer_state[i]});
  }
  if (loss_scaler_) state_.push_back({"scaler", "loss_scale", loss_scaler_->state()});
  for (const StateTensor& entry : state_) state_tensors_.push_back(entry.tensor);
}

void Trainer::SetUpLossScaling() {
  const PrecisionOptions& options = config_.precision;
  if (options.precision != Precision::kFloat16) return;
  loss_scaler_.emplace(options.initial_loss_scale, options.loss_scale_growth_interval);
  if (!compute_->device().is_cuda()) {
    log::Warn("trainer", job(),
              "--precision fp16 on a CPU: loss scaling with float32 compute (libtorch's CPU "
              "autocast has no float16)",
              {{"initial_loss_scale", options.initial_loss_scale}});
  }
}

Status Trainer::OpenEvaluationSet() {
  if (config_.eval_dataset.empty()) return Ok();
  DatasetOptions options = config_.data;
  options.packed_dir = config_.eval_dataset;
  options.record_file.clear();
  options.emulated_read_microseconds_per_sample = 0;
  Result<std::unique_ptr<Dataset>> dataset = MakeDataset(options);
  if (!dataset.ok()) return InvalidArgument("--eval-dataset", dataset.error().ToString());
  eval_dataset_ = std::move(*dataset);
  // Forward, the loss and the transforms were bound to the training set's fields.
  auto describe = [](const DataField& field) {
    std::string text = std::string(c10::toString(field.type)) + " [";
    for (std::size_t i = 0; i < field.shape.size(); ++i)
      text += (i ? ", " : "") + std::to_string(field.shape[i]);
    return text + "]";
  };
  const std::vector<DataField>& train = dataset_->fields();
  const std::vector<DataField>& eval = eval_dataset_->fields();
  for (std::size_t i = 0; i < std::max(train.size(), eval.size()); ++i) {
    if (i >= train.size() || i >= eval.size() || train[i].name != eval[i].name) {
      return InvalidArgument("--eval-dataset", "has the fields " + eval_dataset_->FieldNames() +
                                                   ", the training dataset " +
                                                   dataset_->FieldNames() +
                                                   ": both need the same fields in the same order");
    }
    if (train[i].type != eval[i].type || train[i].shape != eval[i].shape) {
      return InvalidArgument("--eval-dataset", "field " + eval[i].name + " is " +
                                                   describe(eval[i]) + " there but " +
                                                   describe(train[i]) + " in the training dataset");
    }
  }
  log::Info("trainer", job(), "evaluation set opened",
            {{"dir", config_.eval_dataset},
             {"samples", eval_dataset_->size()},
             {"every_steps", config_.eval_every}});
  return Ok();
}

Status Trainer::Evaluate(Collective& collective, const std::vector<int>& batches,
                         int64_t generation) {
  if (!eval_dataset_ || last_evaluation_.step() == progress_.step) return Ok();
  const auto start = SteadyClock::now();
  const int64_t size = eval_dataset_->size();
  const int64_t global = std::accumulate(batches.begin(), batches.end(), int64_t{0});
  const int64_t before = std::accumulate(batches.begin(), batches.begin() + rank_, int64_t{0});
  const int64_t first = global > 0 ? size * before / global : 0;
  const int64_t last =
      global > 0 ? size * (before + batches[static_cast<std::size_t>(rank_)]) / global : size;
  const EvaluationSums shard =
      runner_->Evaluate(*eval_dataset_, first, last, config_.eval_batch_size);
  // Sums in float64, so the result does not depend on how the set was split.
  std::vector<double> sums = {shard.loss, shard.correct, static_cast<double>(shard.samples),
                              shard.samples > 0 ? 1.0 : 0.0,
                              shard.samples > 0 && shard.accuracy ? 1.0 : 0.0};
  if (Status status = collective.AllReduceSum(sums); !status.ok()) return status;
  last_evaluation_.set_generation(generation);
  last_evaluation_.set_step(progress_.step);
  last_evaluation_.set_samples(static_cast<int64_t>(sums[2]));
  last_evaluation_.set_loss(sums[2] > 0 ? sums[0] / sums[2] : 0.0);
  // Every rank that evaluated samples could score them as classes.
  last_evaluation_.set_has_accuracy(sums[4] == sums[3] && sums[3] > 0);
  last_evaluation_.set_accuracy(last_evaluation_.has_accuracy() ? sums[1] / sums[2] : 0.0);
  last_evaluation_.set_seconds(SecondsSince(start));
  if (rank_ == 0) membership_->ReportEvaluation(last_evaluation_);
  log::Info(
      "trainer", job(), "evaluated",
      {{"step", progress_.step},
       {"rank", rank_},
       {"loss", last_evaluation_.loss()},
       {"accuracy", last_evaluation_.has_accuracy() ? nlohmann::json(last_evaluation_.accuracy())
                                                    : nlohmann::json(nullptr)},
       {"samples", last_evaluation_.samples()},
       {"shard", {first, last}},
       {"seconds", last_evaluation_.seconds()}});
  return Ok();
}

Status Trainer::RestoreStartingPoint() {
  if (!config_.checkpoint_dir.empty()) {
    Result<std::optional<CheckpointFile>> checkpoint = ReadLatestCheckpoint(config_.checkpoint_dir);
    if (!checkpoint.ok()) return checkpoint.error();
    if (checkpoint->has_value()) {
      const CheckpointFile& file = **checkpoint;
      if (Status status = RestoreTensors(file.contents, state_,
                                         {"parameter", "buffer", "optimizer", "scaler"}, file.path);
          !status.ok()) {
        return status;
      }
      progress_ = file.contents.progress;
      log::Info("trainer", job(), "resumed from checkpoint",
                {{"step", progress_.step},
                 {"cursor", progress_.cursor},
                 {"checksum", Checksum(parameters_)},
                 {"file", file.path}});
      return Ok();
    }
  }
  if (config_.init_from.empty()) return Ok();
  // Parameters and buffers by name; the optimizer and the step start afresh (fine-tuning).
  std::vector<StateTensor> weights;
  for (const StateTensor& entry : state_) {
    if (entry.group != "optimizer") weights.push_back(entry);
  }
  CheckpointContents source;
  if (config_.init_from.ends_with(".bin")) {
    Result<CheckpointContents> contents = ReadCheckpoint(config_.init_from);
    if (!contents.ok()) return InvalidArgument("--init-from", contents.error().message);
    source = std::move(*contents);
  } else {
    try {
      torch::jit::Module module = torch::jit::load(config_.init_from, torch::kCPU);
      for (const auto& item : module.named_parameters())
        source.tensors.push_back({"parameter", item.name, item.value});
      for (const auto& item : module.named_buffers())
        source.tensors.push_back({"buffer", item.name, item.value});
    } catch (const std::exception& error) {
      return InvalidArgument("--init-from", "cannot load \"" + config_.init_from +
                                                "\" as TorchScript (a model.pt) or a checkpoint "
                                                "(*.bin): " +
                                                ShortError(error));
    }
  }
  if (Status status = RestoreTensors(source, weights, {"parameter", "buffer"},
                                     "--init-from " + config_.init_from);
      !status.ok()) {
    return InvalidArgument("--init-from", status.error().message);
  }
  log::Info("trainer", job(), "initialised from weights",
            {{"file", config_.init_from}, {"checksum", Checksum(parameters_)}});
  return Ok();
}

void Trainer::WriteOutput(const char* why) {
  if (config_.output_dir.empty()) return;
  const std::filesystem::path directory(config_.output_dir);
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  // Written under temporary names and renamed, so a reader never sees half a model.
  const std::filesystem::path model_path = directory / "model.pt";
  const std::filesystem::path model_temporary = directory / ".model.pt.tmp";
  Status status = model_->Save(model_temporary.string());
  if (status.ok()) {
    std::filesystem::rename(model_temporary, model_path, error);
    if (error) status = MakeError(ErrorCode::kUnavailable, "rename: " + error.message());
  }
  if (!status.ok()) {
    log::Error("trainer", job(), "cannot write the trained model",
               {{"error", status.error().ToString()}, {"dir", config_.output_dir}});
    return;
  }
  const nlohmann::json metadata = ModelRecord(
      config_, {.why = why,
                .step = progress_.step,
                .samples_seen = progress_.cursor,
                .equivalent_samples = progress_.equivalent_samples,
                .final_loss = last_loss_,
                .checksum = Checksum(parameters_),
                .parameters = named_parameters_.size(),
                .trained_parameters = parameters_.size(),
                .custom_loss = model_->HasLoss(),
                .dataset_samples = dataset_->size(),
                .last_evaluation = last_evaluation_.step() < 0 ? nullptr : &last_evaluation_});
  const std::filesystem::path json_path = directory / "model.json";
  const std::filesystem::path json_temporary = directory / ".model.json.tmp";
  {
    std::ofstream out(json_temporary);
    out << metadata.dump(2) << "\n";
  }
  std::filesystem::rename(json_temporary, json_path, error);
  log::Info(
      "trainer", job(), "trained model written",
      {{"model", model_path.string()}, {"metadata", json_path.string()}, {"step", progress_.step}});
}

void Trainer::AdoptRecipe(double learning_rate, int64_t total_steps, double sample_efficiency,
                          const char* how) {
  // In band the rate comes through two float32 slots, exact to about 1e-14 of it: a value that
  // close is the rate already held, which stays. An Assignment's value is taken exactly, so a
  // generation's members hold bit-identical rates whatever each decoded before.
  const bool from_assignment = std::string_view(how) == "generation";
  const bool changed =
      learning_rate > 0.0 && std::abs(learning_rate - base_learning_rate_) > 1e-12 * learning_rate;
  if (changed) {
    log::Info("trainer", job(), "learning rate changed live",
              {{"step", progress_.step},
               {"rank", rank_},
               {"from", base_learning_rate_},
               {"to", learning_rate},
               {"how", how}});
  }
  if (learning_rate > 0.0 && (changed || from_assignment)) base_learning_rate_ = learning_rate;
  if (total_steps > 0 && total_steps != steps_ && config_.epochs == 0) {
    log::Info("trainer", job(), "total steps changed live",
              {{"step", progress_.step},
               {"rank", rank_},
               {"from", steps_},
               {"to", total_steps},
               {"how", how}});
    steps_ = total_steps;
  }
  // Exact from an Assignment (every member the same), as the rate; in band within 1e-14.
  const bool efficiency_changed =
      std::isfinite(sample_efficiency) && sample_efficiency > 0.0 &&
      std::abs(sample_efficiency - sample_efficiency_) > 1e-12 * sample_efficiency;
  const double previous_efficiency = sample_efficiency_;
  if (std::isfinite(sample_efficiency) && sample_efficiency > 0.0 &&
      (efficiency_changed || from_assignment)) {
    sample_efficiency_ = sample_efficiency;
  }
  if (efficiency_changed && config_.epochs > 0) {
    log::Info("trainer", job(), "sample efficiency changed: the epochs end at another step",
              {{"step", progress_.step},
               {"rank", rank_},
               {"from", previous_efficiency},
               {"to", sample_efficiency_},
               {"equivalent_samples", progress_.equivalent_samples},
               {"end_position", EndPosition()},
               {"how", how}});
  }
}

void Trainer::HandleControls() {
  while (std::optional<fulcrum::v1::Control> control = membership_->TakeControl()) {
    log::Info("trainer", job(), "control received",
              {{"action", fulcrum::v1::Control::Action_Name(control->action())},
               {"reason", control->reason()}});
    switch (control->action()) {
      case fulcrum::v1::Control::CHECKPOINT:
        checkpoint_requested_ = true;
        break;
      case fulcrum::v1::Control::STOP:
        stop_requested_ = true;
        break;
      case fulcrum::v1::Control::DRAIN:
        drain_requested_ = true;
        break;
      default:
        break;
    }
  }
}

bool Trainer::WantsToLeave(int64_t generation) const {
  return stop_signal_.load() != 0 || stop_requested_ || drain_requested_ ||
         membership_->HasNewerGeneration(generation);
}

void Trainer::WriteCheckpointNow(const char* why) {
  if (config_.checkpoint_dir.empty()) return;
  const std::string writer = config_.pod + "." + std::to_string(getpid());
  Status status =
      WriteCheckpoint(config_.checkpoint_dir, writer, progress_.step,
                      EncodeCheckpoint(state_, progress_, {{"job", job()}, {"loss", last_loss_}}));
  if (!status.ok()) {
    log::Error("trainer", job(), "checkpoint failed", {{"error", status.error().ToString()}});
    return;
  }
  log::Info("trainer", job(), "checkpoint written",
            {{"step", progress_.step}, {"checksum", Checksum(parameters_)}, {"why", why}});
}

void Trainer::LogFinished(const char* why) {
  log::Info("trainer", job(), "finished",
            {{"why", why},
             {"step", progress_.step},
             {"cursor", progress_.cursor},
             {"checksum", Checksum(parameters_)},
             // Buffers too (BatchNorm statistics): equal on every rank when they are averaged.
             {"model_checksum", Checksum(model_tensors_)},
             {"loss", last_loss_},
             {"pid", static_cast<int>(getpid())},
             {"samples", totals_.samples},
             {"step_seconds_total", totals_.step_seconds},
             {"data_wait_seconds_total", totals_.data_wait_seconds},
             {"loads_started", loader_ ? loader_->loads_started() : 0},
             {"loads_dropped", loader_ ? loader_->loads_dropped() : 0},
             {"overflow_steps", overflow_steps_},
             {"coordinator_seconds_total", totals_.coordinator_seconds}});
}

int Trainer::Run() {
  int64_t generation = 0;
  while (true) {
    HandleControls();
    if (std::optional<Error> fatal = membership_->Fatal()) {
      log::Error("trainer", job(), "cannot train in this job", {{"error", fatal->ToString()}});
      return 2;
    }
    if (drain_requested_) {
      LogFinished("drained");
      return 0;
    }
    if (nonfinite_steps_ >= config_.max_nonfinite_steps) {
      log::Error("trainer", job(), "training diverged",
                 {{"error", "the loss was not finite for " + std::to_string(nonfinite_steps_) +
                                " steps in a row (their updates skipped) up to step " +
                                std::to_string(progress_.step) +
                                ": lower the learning rate, add warmup or gradient clipping, or "
                                "check the data for NaN or inf"}});
      LogFinished("diverged");
      return kDivergedExitCode;
    }
    if (stop_signal_.load() != 0 || stop_requested_) {
      WriteCheckpointNow(stop_requested_ ? "stop requested" : "SIGTERM");
      LogFinished("stopped");
      return 0;
    }
    if (Finished()) {
      if (rank_ == 0) {
        WriteCheckpointNow("final");
        WriteOutput(config_.epochs > 0 ? "epochs done" : "steps done");
      }
      LogFinished(config_.epochs > 0 ? "epochs done" : "steps done");
      membership_->Flush(std::chrono::seconds(5));  // the final report and evaluation
      return 0;
    }
    std::optional<fulcrum::v1::Assignment> assignment =
        membership_->WaitForGeneration(generation, kWaitSlice);
    if (!assignment) continue;
    generation = assignment->generation();
    membership_->SetProgress(generation, progress_.step);
    switch (RunGeneration(*assignment)) {
      case GenerationEnd::kFinished:
      case GenerationEnd::kLeft:
        break;
      case GenerationEnd::kFellOut:
        if (!membership_->RequestRejoin(generation, "collective failed")) return 1;
        break;
      case GenerationEnd::kFatal:
        return 1;
      case GenerationEnd::kInvalidInput:
        return 2;
    }
  }
}

Status Trainer::SyncState(Collective& collective) {
  // Every rank offers its step and state size; the most advanced state wins, so the step
  // never goes back, and a newcomer (step 0) or a restarted job (its checkpoint) catches up.
  const auto world = static_cast<std::size_t>(collective.world_size());
  std::vector<double> offers(2 * world, 0.0);
  offers[static_cast<std::size_t>(rank_)] = static_cast<double>(progress_.step);
  offers[world + static_cast<std::size_t>(rank_)] = static_cast<double>(PackedSize(state_tensors_));
  if (Status status = collective.AllReduceSum(offers); !status.ok()) return status;
  int source = 0;
  for (std::size_t r = 0; r < world; ++r) {
    if (offers[world + r] != offers[world]) {
      return InvalidArgument("--model",
                             "trainers of this job disagree on the model or optimizer "
                             "(state sizes differ): start them with the same flags");
    }
    if (offers[r] > offers[static_cast<std::size_t>(source)]) source = static_cast<int>(r);
  }
  std::vector<std::byte> bytes = rank_ == source
                                     ? PackState(state_tensors_, progress_)
                                     : std::vector<std::byte>(PackedSize(state_tensors_));
  if (Status status = collective.Broadcast(bytes, source); !status.ok()) return status;
  if (rank_ != source) {
    Result<Progress> progress = UnpackState(bytes, state_tensors_);
    if (!progress.ok()) return progress.error();
    progress_ = *progress;
  }
  log::Info("trainer", job(), "state synchronised",
            {{"source_rank", source},
             {"rank", rank_},
             {"step", progress_.step},
             {"cursor", progress_.cursor},
             {"checksum", Checksum(parameters_)}});
  return Ok();
}

GenerationEnd Trainer::RunGeneration(const fulcrum::v1::Assignment& assignment) {
  rank_ = assignment.rank();
  const int world = assignment.world_size();
  if (assignment.batches_size() != world || rank_ < 0 || rank_ >= world) {
    log::Error("trainer", job(), "malformed assignment: batches must have world_size entries",
               {{"generation", assignment.generation()}});
    return GenerationEnd::kFellOut;
  }
  log::Info("trainer", job(), "joining generation",
            {{"generation", assignment.generation()},
             {"rank", rank_},
             {"world_size", world},
             {"rendezvous", assignment.rendezvous_address()},
             {"reason", assignment.reason()}});
  CollectiveOptions options;
  options.rank = rank_;
  options.world_size = world;
  options.interface_host = config_.host;
  options.timeout = std::chrono::milliseconds(config_.collective_timeout_ms);
  const std::string prefix =
      "fulcrum/" + job() + "/gen-" + std::to_string(assignment.generation()) + "/";
  Result<std::unique_ptr<Collective>> collective = ConnectCollective(
      collective_kind_, assignment.rendezvous_address(), prefix, options, config_.device_index);
  if (!collective.ok()) {
    log::Warn("trainer", job(), "fell out: cannot form the group",
              {{"error", collective.error().ToString()}});
    return GenerationEnd::kFellOut;
  }
  // A generation normally ends in band, after a step all ranks finish. But when the coordinator
  // replaces it because a member hung (or vanished without a word), a collective with that
  // member never finishes: fail it at once rather than at the collective timeout. The step in
  // flight is not committed, so the next generation starts from a consistent state. Declared
  // after the collective, so it stops (and is joined) before the collective goes.
  std::jthread abandon([this, generation = assignment.generation(),
                        group = collective->get()](std::stop_token stop) {
    if (!membership_->WaitForAbandon(generation, stop)) return;
    const bool aborted = group->Abort("generation " + std::to_string(generation) +
                                      " abandoned: a member hung or vanished");
    log::Warn("trainer", job(), "abandoning this generation's collectives: a member hung",
              {{"generation", generation}, {"aborted", aborted}});
  });
  if (Status status = SyncState(**collective); !status.ok()) {
    if (status.error().code == ErrorCode::kInvalidArgument) {
      log::Error("trainer", job(), "cannot join", {{"error", status.error().ToString()}});
      return GenerationEnd::kFatal;
    }
    log::Warn("trainer", job(), "fell out while synchronising state",
              {{"error", status.error().ToString()}});
    return GenerationEnd::kFellOut;
  }
  // Every member of the generation got the same values: the first step uses them on every rank
  // (a trainer started before an edit would otherwise use its own flags for it).
  AdoptRecipe(assignment.learning_rate(), assignment.total_steps(), SampleEfficiencyOf(assignment),
              "generation");
  fulcrum::v1::Assignment plan = assignment;
  PrefetchFrom(progress_.cursor, std::vector<int>(plan.batches().begin(), plan.batches().end()));
  // Evaluation errors: a collective that failed ends the generation; a model that fails on the
  // evaluation set ends the job, as a failed step does.
  auto evaluate = [&]() -> std::optional<GenerationEnd> {
    try {
      const std::vector<int> batches(plan.batches().begin(), plan.batches().end());
      if (Status status = Evaluate(**collective, batches, assignment.generation()); !status.ok()) {
        log::Warn("trainer", job(), "fell out while evaluating",
                  {{"error", status.error().ToString()}});
        return GenerationEnd::kFellOut;
      }
    } catch (const std::exception& error) {
      log::Error("trainer", job(), "evaluation failed in the model or data",
                 {{"step", progress_.step}, {"error", error.what()}});
      return GenerationEnd::kFatal;
    }
    return std::nullopt;
  };
  while (true) {
    if (Finished()) {
      // The final evaluation: every rank reaches the end at the same step.
      if (std::optional<GenerationEnd> end = evaluate()) return *end;
      return GenerationEnd::kFinished;
    }
    HandleControls();
    const int64_t global_batch =
        std::accumulate(plan.batches().begin(), plan.batches().end(), int64_t{0});
    if (global_batch > dataset_->size()) {
      // A step would train some samples twice: refuse rather than train on a wrong epoch.
      log::Error("trainer", job(), "the dataset is smaller than one global batch",
                 {{"error", "the dataset has " + std::to_string(dataset_->size()) +
                                " samples, fewer than one global batch of " +
                                std::to_string(global_batch) +
                                ": lower globalBatchSize or train on more data"}});
      return GenerationEnd::kInvalidInput;
    }
    Result<bool> stay = MakeError(ErrorCode::kInternal, "no step");
    try {
      stay = TrainStep(**collective, assignment, plan);
    } catch (const std::exception& error) {
      // The model or data itself is broken (shape mismatch, bad label): no retry helps.
      log::Error("trainer", job(), "training step failed in the model or data",
                 {{"step", progress_.step}, {"error", error.what()}});
      return GenerationEnd::kFatal;
    }
    if (!stay.ok()) {
      log::Warn("trainer", job(), "fell out: step aborted, state unchanged",
                {{"step", progress_.step},
                 {"generation", assignment.generation()},
                 {"error", stay.error().ToString()}});
      return GenerationEnd::kFellOut;
    }
    // Every rank committed the same step, so all evaluate at it (leaving or not).
    if (config_.eval_every > 0 && progress_.step % config_.eval_every == 0 && !Finished()) {
      if (std::optional<GenerationEnd> end = evaluate()) return *end;
    }
    if (!*stay) return GenerationEnd::kLeft;
  }
}

// Forward and backward on sum-reduced loss (the gradient is b_i times the local mean), in
// `micro_steps` slices whose gradients accumulate: the same sum whatever the split.
torch::Tensor Trainer::ForwardBackwardOnce(const Batch& batch, const BatchRequest& request,
                                           int micro_steps) {
  // Backward starts from no gradients (set to none, as PyTorch's zero_grad does by default):
  // the first micro-step's gradients are backward's own tensors, with no zeroing and no
  // addition into zeros; later micro-steps add to them.
  for (torch::Tensor& parameter : parameters_) parameter.mutable_grad() = torch::Tensor();
  // Summed in float64 on the device, as `+= loss.item<double>()` did on the host, without the
  // wait for the device that each item() was.
  torch::Tensor loss_sum =
      torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat64).device(compute_->device()));
  const std::vector<int64_t>& indices = request.indices;
  for (int micro = 0; micro < micro_steps; ++micro) {
    const std::size_t begin =
        indices.size() * static_cast<std::size_t>(micro) / static_cast<std::size_t>(micro_steps);
    const std::size_t end = indices.size() * static_cast<std::size_t>(micro + 1) /
                            static_cast<std::size_t>(micro_steps);
    const auto samples = static_cast<int>(end - begin);
    // The CPU twin of a GPU running out of memory: the same error, from a configured limit.
    TORCH_CHECK_WITH(
        OutOfMemoryError,
        config_.emulated_max_micro_batch == 0 || samples <= config_.emulated_max_micro_batch,
        "EMULATED out of memory: micro-batch of ", samples, " > --emulated-max-micro-batch ",
        config_.emulated_max_micro_batch);
    const auto first = static_cast<int64_t>(begin), last = static_cast<int64_t>(end);
    const torch::Tensor loss =
        runner_->ForwardLoss(runner_->Fields(batch, std::span(indices).subspan(begin, end - begin),
                                             first, last, request.range.begin + first));
    // The last micro-step's gradients are final: all-reduce them while backward goes on.
    if (config_.overlap && micro + 1 == micro_steps) buckets_->Arm();
    if (loss_scaler_) {
      (loss * loss_scaler_->scale()).backward();  // unscaled with the mean (WriteMeanGradients)
    } else {
      loss.backward();
    }
    loss_sum += loss.detach().to(torch::kFloat64);
  }
  return loss_sum;
}

// Runs the step's forward and backward; when the device runs out of memory, frees what the
// failed attempt held and retries the same samples in twice as many micro-steps (gradient
// accumulation), down to one sample per micro-step, instead of dying. The limit is kept for
// later steps, and the step's report tells the balancer, which lowers this worker's cap.
Result<torch::Tensor> Trainer::ForwardBackward(Collective& collective, const Batch& batch,
                                               const BatchRequest& request, int planned_micro_steps,
                                               int& failed_micro_batch) {
  const std::size_t control_elements = ControlLayout::Size(collective.world_size());
  buckets_->BeginStep(collective, compute_->CurrentStream(), control_elements);
  const int local_batch = static_cast<int>(request.indices.size());
  if (local_batch == 0) {
    for (torch::Tensor& parameter : parameters_) parameter.mutable_grad() = torch::Tensor();
    return torch::zeros({},
                        torch::TensorOptions().dtype(torch::kFloat64).device(compute_->device()));
  }
  auto ceil_div = [](int a, int b) { return (a + b - 1) / b; };
  int micro_steps = std::clamp(planned_micro_steps, 1, local_batch);
  if (micro_batch_limit_ < local_batch)
    micro_steps = std::max(micro_steps, ceil_div(local_batch, micro_batch_limit_));
  while (true) {
    try {
      return ForwardBackwardOnce(batch, request, micro_steps);
    } catch (const c10::OutOfMemoryError& error) {
      const int failed = ceil_div(local_batch, micro_steps);
      failed_micro_batch = std::max(failed_micro_batch, failed);
      for (torch::Tensor& parameter : parameters_) parameter.mutable_grad() = torch::Tensor();
      compute_->ReleaseCachedMemory();
      if (failed <= 1) throw;  // one sample does not fit: nothing left to split
      micro_batch_limit_ = std::min(micro_batch_limit_, failed - 1);
      if (buckets_->started_any()) {
        // Out of memory late in backward, after a bucket went out: the peers have reduced it
        // once, so this step cannot be redone here. Fall out; the next generation splits.
        return MakeError(ErrorCode::kResourceExhausted,
                         "out of memory after gradients were already being all-reduced");
      }
      buckets_->BeginStep(collective, compute_->CurrentStream(), control_elements);
      micro_steps = std::min(local_batch, micro_steps * 2);
      log::Warn("trainer", job(), "out of memory: retrying the step in smaller micro-steps",
                {{"step", progress_.step},
                 {"failed_micro_batch", failed},
                 {"micro_steps", micro_steps},
                 {"error", std::string(error.what()).substr(0, 200)}});
    }
  }
}

Result<BatchRequest> Trainer::RequestAt(int64_t cursor, const std::vector<int>& batches) {
  Result<PositionRange> range = ShardForRank(cursor, batches, rank_);
  if (!range.ok()) return range.error();
  if (config_.epochs > 0) {
    const int64_t end_position = EndPosition();
    range->begin = std::min(range->begin, end_position);
    range->end = std::min(range->end, end_position);
  }
  return BatchRequest{*range, order_->Indices(*range)};
}

void Trainer::PrefetchFrom(int64_t cursor, const std::vector<int>& batches) {
  const int64_t global_batch = std::accumulate(batches.begin(), batches.end(), int64_t{0});
  std::vector<BatchRequest> wanted;
  for (int k = 0; k < config_.prefetch_steps && global_batch > 0; ++k) {
    Result<BatchRequest> request = RequestAt(cursor + k * global_batch, batches);
    if (!request.ok() || request->indices.empty()) break;
    wanted.push_back(std::move(*request));
  }
  loader_->Prefetch(std::move(wanted));
}

Result<bool> Trainer::TrainStep(Collective& collective, const fulcrum::v1::Assignment& base,
                                fulcrum::v1::Assignment& plan) {
  const auto start = SteadyClock::now();
  const int world = collective.world_size();
  const std::vector<int> batches(plan.batches().begin(), plan.batches().end());
  Result<BatchRequest> request = RequestAt(progress_.cursor, batches);
  if (!request.ok()) return request.error();
  const PositionRange range = request->range;
  const std::vector<int64_t>& indices = request->indices;
  const int local_batch = static_cast<int>(indices.size());
  // The wait for this step's batch (loading, copying to the device) is data wait: it is timed
  // apart and kept out of the compute the balancer fits, since a slow disk is not a slow GPU.
  const LoadedBatch loaded = loader_->Take(*request);
  const double data_wait_seconds = loaded.wait_seconds;
  // The next steps' batches load while this one computes, assuming the plan stays.
  PrefetchFrom(progress_.cursor + std::accumulate(batches.begin(), batches.end(), int64_t{0}),
               batches);
  const auto compute_start = SteadyClock::now();
  const double cpu_start = ProcessCpuSeconds() - loader_->cpu_seconds();
  compute_->ResetPeakMemory();
  compute_->StartCompute();

  int failed_micro_batch = 0;
  Result<torch::Tensor> forward_backward = ForwardBackward(
      collective, loaded.batch, *request, plan.accumulation_steps(), failed_micro_batch);
  if (!forward_backward.ok()) return forward_backward.error();
  const torch::Tensor loss_sum = *forward_backward;
  compute_->EndCompute();

  // The control values are known once backward is queued (the loss sum joins them on the
  // device, not read here); they complete the last gradient bucket, which goes out once compute
  // is over: after an emulated slowdown's sleep, as a slow GPU's would (it finishes backward
  // late, it does not finish on time and then sleep).
  std::vector<double> control(ControlLayout::Size(world), 0.0);
  control[ControlLayout::kBatch] = local_batch;
  control[ControlLayout::kLeave] = WantsToLeave(base.generation()) ? 1.0 : 0.0;
  control[ControlLayout::kCheckpoint] = checkpoint_requested_ ? 1.0 : 0.0;
  const auto plan_lookup_start = SteadyClock::now();
  if (rank_ == 0) {
    const fulcrum::v1::Assignment next = membership_->PlanAt(base, progress_.step + 1);
    const fulcrum::v1::Assignment& chosen = next.batches_size() == world ? next : plan;
    control[ControlLayout::kAccumulation] = std::max(1, chosen.accumulation_steps());
    EncodeInTwoSlots(chosen.learning_rate(), control, ControlLayout::kLearningRate);
    EncodeInTwoSlots(std::floor(static_cast<double>(chosen.total_steps()) / kStepsUnit), control,
                     ControlLayout::kTotalSteps);
    control[ControlLayout::kTotalSteps + 1] =
        static_cast<double>(chosen.total_steps() % static_cast<int64_t>(kStepsUnit));
    EncodeInTwoSlots(SampleEfficiencyOf(chosen), control, ControlLayout::kSampleEfficiency);
    for (int r = 0; r < world; ++r)
      control[ControlLayout::kPlan + static_cast<std::size_t>(r)] = chosen.batches(r);
  }
  double coordinator_seconds = SecondsSince(plan_lookup_start);

  // Buffers (BatchNorm statistics) weighted by this rank's samples: all ranks get the mean.
  const GradientBuckets::DeviceValue loss_value{ControlLayout::kLossSum, loss_sum};
  const double factor = slowdown_.Current(job());
  const bool emulated = factor > 1.0;
  // Without an emulated slowdown the last bucket is queued now, behind backward on the device,
  // so the device goes from backward to the all-reduce without waiting for the host to notice
  // that backward ended.
  if (!emulated) buckets_->SetControl(control, local_batch, std::span(&loss_value, 1));

  // Waits for backward to end on the device (the host assembled the control values meanwhile):
  // what follows is timed as the step's communication, which the balancer keeps apart from
  // compute, and the emulated slowdown's wall clock must cover the device's compute.
  const double device_compute_seconds = compute_->ComputeSeconds();
  double emulated_seconds = 0.0;
  if (emulated) {
    // The compute's own CPU time: the loader threads' is taken out.
    emulated_seconds =
        EmulatedSlowdown::SleepSeconds(factor, SecondsSince(compute_start),
                                       ProcessCpuSeconds() - loader_->cpu_seconds() - cpu_start);
    std::this_thread::sleep_for(std::chrono::duration<double>(emulated_seconds));
  }
  // The device's clock (CUDA events on a GPU), plus the emulated slowdown's sleep if any.
  const double compute_seconds = device_compute_seconds + emulated_seconds;
  if (emulated) buckets_->SetControl(control, local_batch, std::span(&loss_value, 1));
  // Everything after compute is split-independent (packing, all-reduce, optimizer update) except
  // the wait for slower ranks; the coordinator takes the least over ranks as the step's tail.
  const auto after_compute = SteadyClock::now();

  // The buckets backward did not start (all of them without overlap), then the wait for all.
  if (Status status = buckets_->Finish(); !status.ok()) return status.error();
  control = buckets_->SummedControl();
  const double comm_seconds = SecondsSince(after_compute);

  // Commit: from here on the step happened, identically on every rank.
  const double global_batch = control[ControlLayout::kBatch];
  double learning_rate = 0.0;
  // A non-finite loss (the all-reduced sum: every rank sees the same) skips the update on every
  // rank; too many in a row end the job instead of training on garbage.
  const bool finite = std::isfinite(control[ControlLayout::kLossSum]);
  nonfinite_steps_ = finite ? 0 : nonfinite_steps_ + 1;
  if (!finite) {
    log::Warn("trainer", job(), "non-finite loss: the update is skipped on every rank",
              {{"step", progress_.step}, {"in_a_row", nonfinite_steps_}});
  }
  const double loss_scale = loss_scaler_ ? loss_scaler_->scale() : 1.0;
  // What the report needs from the device, queued before the update so that reading them waits
  // for these values, not for the optimizer's kernels (ComputeDevice::DeferToHost). The norm is
  // 0 where no update was computed, as before.
  // Divided by the loss scale too: the mean gradient of the unscaled loss.
  const torch::Tensor gradient_norm =
      global_batch > 0 && finite
          ? buckets_->WriteMeanGradients(global_batch * loss_scale, config_.clip_gradient_norm)
          : torch::zeros({},
                         torch::TensorOptions().dtype(torch::kFloat64).device(compute_->device()));
  const DeferredScalars from_device =
      compute_->DeferToHost({loss_sum, gradient_norm, buckets_->LocalSquaredNorm()});
  if (global_batch > 0 && finite) {
    // Every rank holds the same aggregated gradient, so every rank takes the same decision. A
    // loss scaler must know whether the gradient overflowed before the update: a wait for the
    // device that only mixed precision with a loss scaler pays (PyTorch's GradScaler too).
    const bool apply =
        !loss_scaler_ || loss_scaler_->Update(std::isfinite(gradient_norm.item<double>()));
    if (apply) {
      // A job that trains for epochs decays over its equivalent samples: its steps change with
      // B.
      learning_rate = steps_ <= 0 && config_.epochs > 0
                          ? LearningRateAtSample(base_learning_rate_, config_.schedule,
                                                 progress_.step, progress_.equivalent_samples,
                                                 static_cast<double>(LastPosition()),
                                                 global_batch * sample_efficiency_)
                          : LearningRateAt(base_learning_rate_, config_.schedule, progress_.step,
                                           TotalSteps(static_cast<int64_t>(global_batch)));
      std::vector<torch::Tensor> mean_gradients;
      mean_gradients.reserve(parameters_.size());
      for (const torch::Tensor& parameter : parameters_) mean_gradients.push_back(parameter.grad());
      optimizer_->Step(parameters_, mean_gradients, learning_rate);
    } else {
      ++overflow_steps_;
      log::Warn("trainer", job(),
                "gradient overflow: the update is skipped on every rank, the loss scale halved",
                {{"step", progress_.step},
                 {"loss_scale", loss_scale},
                 {"next_loss_scale", loss_scaler_->scale()}});
    }
  }
  // The buffers' means (BatchNorm statistics) are next read by the next forward: queued after
  // the update, so the device runs the optimizer while the host launches these.
  buckets_->WriteAveraged(global_batch);
  const int64_t step = progress_.step;
  progress_.step += 1;
  progress_.cursor += static_cast<int64_t>(global_batch);
  progress_.equivalent_samples += global_batch * sample_efficiency_;
  last_loss_ = global_batch > 0 ? control[ControlLayout::kLossSum] / global_batch : last_loss_;
  checkpoint_requested_ = false;
  const double step_seconds = SecondsSince(start);
  const double after_compute_seconds = SecondsSince(after_compute);
  // The update is queued; these waits end before it runs.
  const std::vector<double> scalars = compute_->ReadDeferred(from_device);
  const double local_loss_sum = scalars[0];
  const double gradient_norm_value = scalars[1];
  const double local_squared_norm = scalars[2];

  if (sample_log_.is_open()) {
    sample_log_ << nlohmann::json{{"step", step},
                                  {"generation", base.generation()},
                                  {"rank", rank_},
                                  {"batches", batches},
                                  {"positions", {range.begin, range.end}},
                                  {"step_seconds", step_seconds},
                                  {"compute_seconds", compute_seconds},
                                  {"data_wait_seconds", data_wait_seconds},
                                  // From compute's end to the summed control values, and to
                                  // the update queued: where a step's time after compute goes.
                                  {"comm_seconds", comm_seconds},
                                  {"after_compute_seconds", after_compute_seconds},
                                  // The rate the update used (0: none, a skipped step).
                                  {"learning_rate", learning_rate},
                                  // What each of the step's samples counted for --epochs.
                                  {"sample_efficiency", sample_efficiency_},
                                  // Wall clock of the step's end: benchmarks line steps up
                                  // with events in other processes (membership_bench.py).
                                  {"unix_time", UnixSeconds()},
                                  {"indices", indices}}
                       .dump()
                << "\n";
    sample_log_.flush();
  }
  fulcrum::v1::StepReport report;
  report.set_generation(base.generation());
  report.set_step(step);
  report.set_local_batch(local_batch);
  report.set_compute_seconds(compute_seconds);
  report.set_comm_seconds(comm_seconds);
  report.set_after_compute_seconds(after_compute_seconds);
  report.set_peak_memory(compute_->PeakMemoryBytes());
  if (failed_micro_batch > 0) {
    report.set_out_of_memory(true);
    report.set_out_of_memory_micro_batch(failed_micro_batch);
  }
  report.set_loss(local_batch > 0 ? local_loss_sum / local_batch : 0.0);
  report.set_step_seconds(step_seconds);
  report.set_data_wait_seconds(data_wait_seconds);
  // Clipped by the end of the last epoch: fewer samples than the plan gave this rank.
  report.set_partial(local_batch < batches[static_cast<std::size_t>(rank_)]);
  // One clock for the coordinator's throughput: when this step ended here, after the update.
  report.set_step_end_seconds(
      std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count());
  report.set_global_loss(global_batch > 0 && finite
                             ? control[ControlLayout::kLossSum] / global_batch
                             : std::numeric_limits<double>::quiet_NaN());
  // The gradient noise scale's inputs: the buckets held loss_scale × Σ of this rank's per-sample
  // gradients, so its mean gradient is that over (loss_scale × local batch); the aggregated mean
  // gradient's norm is WriteMeanGradients' (unscaled, before clipping).
  if (local_batch > 0) {
    const double summed_over = loss_scale * local_batch;
    report.set_local_gradient_squared_norm(local_squared_norm / (summed_over * summed_over));
  }
  if (std::isfinite(gradient_norm_value)) {
    report.set_global_gradient_squared_norm(gradient_norm_value * gradient_norm_value);
  }
  const auto report_start = SteadyClock::now();
  // Progress first: Report wakes the link's writer thread, which then takes the link's lock.
  membership_->SetProgress(base.generation(), progress_.step);
  membership_->Report(report);
  coordinator_seconds += SecondsSince(report_start);
  totals_.coordinator_seconds += coordinator_seconds;
  totals_.step_seconds += step_seconds;
  totals_.samples += local_batch;
  totals_.data_wait_seconds += data_wait_seconds;
  metrics_->ObserveStep(step_seconds, data_wait_seconds, local_batch, last_loss_, base.generation(),
                        progress_.step);

  std::vector<int> next(world);
  for (int r = 0; r < world; ++r)
    next[static_cast<std::size_t>(r)] =
        static_cast<int>(control[ControlLayout::kPlan + static_cast<std::size_t>(r)]);
  if (next != batches) {
    log::Info("trainer", job(), "new batches applied in place",
              {{"step", progress_.step}, {"batches", next}, {"rank", rank_}});
  }
  plan.clear_batches();
  for (int batch : next) plan.add_batches(batch);
  plan.set_accumulation_steps(static_cast<int>(control[ControlLayout::kAccumulation]));
  // From the next step on, as the plan: this step's update already used the rate it had.
  AdoptRecipe(
      DecodeFromTwoSlots(control, ControlLayout::kLearningRate),
      static_cast<int64_t>(control[ControlLayout::kTotalSteps]) * static_cast<int64_t>(kStepsUnit) +
          static_cast<int64_t>(control[ControlLayout::kTotalSteps + 1]),
      DecodeFromTwoSlots(control, ControlLayout::kSampleEfficiency), "in band");
  // The prefetch made before compute assumed this step's plan; only a new one changes the ranges.
  if (control[ControlLayout::kLeave] == 0.0 && next != batches) {
    PrefetchFrom(progress_.cursor, next);
  }

  if (step % kLogEvery == 0) {
    log::Info("trainer", job(), "step",
              {{"step", step},
               {"generation", base.generation()},
               {"rank", rank_},
               {"local_batch", local_batch},
               {"global_batch", global_batch},
               {"loss", last_loss_},
               {"gradient_norm", gradient_norm_value},
               {"learning_rate", learning_rate},
               {"loss_scale", loss_scale},
               {"clipped",
                config_.clip_gradient_norm > 0 && gradient_norm_value > config_.clip_gradient_norm},
               {"compute_seconds", compute_seconds},
               {"data_wait_seconds", data_wait_seconds},
               {"comm_seconds", comm_seconds},
               {"overlapped_buckets", buckets_->overlapped_buckets()},
               {"step_seconds", step_seconds},
               {"coordinator_seconds", coordinator_seconds},
               {"samples_per_second", step_seconds > 0 ? global_batch / step_seconds : 0.0}});
  }
  const bool periodic =
      config_.checkpoint_every > 0 && progress_.step % config_.checkpoint_every == 0;
  if (rank_ == 0 && (periodic || control[ControlLayout::kCheckpoint] > 0)) {
    WriteCheckpointNow(periodic ? "periodic" : "requested");
  }
  if (nonfinite_steps_ >= config_.max_nonfinite_steps) return false;  // diverged: Run() ends it
  return control[ControlLayout::kLeave] == 0.0;
}

}  // namespace

int RunTrainer(const TrainerConfig& config, const std::atomic<int>& stop_signal) {
  Trainer trainer(config, stop_signal);
  if (Status status = trainer.Init(); !status.ok()) {
    log::Error("trainer", config.job, "cannot start", {{"error", status.error().ToString()}});
    return 2;
  }
  return trainer.Run();
}

}  // namespace fulcrum::trainer
