#include "operator/controller/job_spec.h"

#include <algorithm>

namespace fulcrum::controller {
namespace {

// Reads `pointer` if present; a present value of the wrong type is an error naming the field.
template <typename T>
Status Read(const nlohmann::json& object, const std::string& pointer, T& out) {
  const nlohmann::json::json_pointer path(pointer);
  if (!object.contains(path)) return Ok();
  const nlohmann::json& value = object.at(path);
  try {
    out = value.get<T>();
    return Ok();
  } catch (const nlohmann::json::exception&) {
    std::string field = pointer.substr(1);
    std::replace(field.begin(), field.end(), '/', '.');
    return InvalidArgument(field, "has the wrong type (" + std::string(value.type_name()) +
                                      "): is the HeteroTrainingJob CRD installed (crds/)?");
  }
}

template <typename T>
Status ReadOptional(const nlohmann::json& object, const std::string& pointer,
                    std::optional<T>& out) {
  if (!object.contains(nlohmann::json::json_pointer(pointer))) return Ok();
  T value{};
  if (Status status = Read(object, pointer, value); !status.ok()) return status;
  out = value;
  return Ok();
}

}  // namespace

Result<JobSpec> ParseJobSpec(const nlohmann::json& job) {
  JobSpec spec;
  std::map<std::string, int64_t> caps;
  std::vector<nlohmann::json> env;
  std::string runtime = "trainer";
  for (Status status : {
           Read(job, "/spec/runtime", runtime),
           Read(job, "/metadata/namespace", spec.ns),
           Read(job, "/metadata/name", spec.name),
           Read(job, "/metadata/uid", spec.uid),
           Read(job, "/metadata/generation", spec.generation),
           Read(job, "/spec/image", spec.image),
           Read(job, "/spec/command", spec.command),
           Read(job, "/spec/args", spec.args),
           Read(job, "/spec/env", env),
           Read(job, "/spec/model/builtin", spec.builtin_model),
           Read(job, "/spec/model/torchScriptPath", spec.torchscript_path),
           Read(job, "/spec/dataset/synthetic/samples", spec.synthetic_samples),
           Read(job, "/spec/dataset/synthetic/seed", spec.seed),
           Read(job, "/spec/dataset/recordFile/path", spec.record_file),
           Read(job, "/spec/dataset/recordFile/featuresPerRecord", spec.features_per_record),
           Read(job, "/spec/dataset/packed/path", spec.packed.path),
           Read(job, "/spec/dataset/packed/inputField", spec.packed.input_field),
           Read(job, "/spec/dataset/packed/labelField", spec.packed.label_field),
           ReadOptional(job, "/spec/dataset/packed/transforms/scale", spec.packed.scale),
           Read(job, "/spec/dataset/packed/transforms/normalize/mean", spec.packed.mean),
           Read(job, "/spec/dataset/packed/transforms/normalize/std", spec.packed.std),
           Read(job, "/spec/dataset/packed/transforms/randomCrop/padding",
                spec.packed.crop_padding),
           Read(job, "/spec/dataset/packed/transforms/horizontalFlip", spec.packed.horizontal_flip),
           Read(job, "/spec/globalBatchSize", spec.global_batch),
           Read(job, "/spec/replicas/min", spec.min_replicas),
           Read(job, "/spec/replicas/max", spec.max_replicas),
           Read(job, "/spec/gpusPerWorker", spec.gpus_per_worker),
           Read(job, "/spec/gpuSelector/allowedProducts", spec.gpu_selector.allowed),
           Read(job, "/spec/gpuSelector/deniedProducts", spec.gpu_selector.denied),
           Read(job, "/spec/gpuSelector/maxWorkersPerProduct", caps),
           Read(job, "/spec/balancing/policy", spec.policy),
           Read(job, "/spec/balancing/minGain", spec.min_gain),
           Read(job, "/spec/balancing/intervalSteps", spec.interval_steps),
           Read(job, "/spec/batching/mode", spec.batching.mode),
           Read(job, "/spec/batching/min", spec.batching.min),
           Read(job, "/spec/batching/max", spec.batching.max),
           Read(job, "/spec/batching/learningRateScaling", spec.batching.learning_rate_scaling),
           Read(job, "/spec/batching/minStepsBetweenChanges",
                spec.batching.min_steps_between_changes),
           Read(job, "/spec/batching/maxFactor", spec.batching.max_factor),
           ReadOptional(job, "/spec/training/steps", spec.steps),
           ReadOptional(job, "/spec/training/epochs", spec.epochs),
           Read(job, "/spec/training/optimizer", spec.optimizer),
           Read(job, "/spec/training/learningRate", spec.learning_rate),
           ReadOptional(job, "/spec/training/momentum", spec.momentum),
           Read(job, "/spec/training/nesterov", spec.nesterov),
           Read(job, "/spec/training/weightDecay", spec.weight_decay),
           ReadOptional(job, "/spec/training/gradientClipNorm", spec.gradient_clip_norm),
           Read(job, "/spec/training/precision", spec.precision),
           Read(job, "/spec/training/channelsLast", spec.channels_last),
           Read(job, "/spec/training/schedule/kind", spec.schedule.kind),
           Read(job, "/spec/training/schedule/warmupSteps", spec.schedule.warmup_steps),
           ReadOptional(job, "/spec/training/schedule/finalFactor", spec.schedule.final_factor),
           Read(job, "/spec/training/schedule/stepSize", spec.schedule.step_size),
           ReadOptional(job, "/spec/training/schedule/gamma", spec.schedule.gamma),
           Read(job, "/spec/checkpoint/path", spec.checkpoint_path),
           Read(job, "/spec/checkpoint/everySteps", spec.checkpoint_every),
           Read(job, "/spec/initFrom/path", spec.init_from),
           Read(job, "/spec/output/path", spec.output_path),
           Read(job, "/spec/evaluation/dataset", spec.evaluation.dataset),
           Read(job, "/spec/evaluation/everySteps", spec.evaluation.every_steps),
           Read(job, "/spec/evaluation/batchSize", spec.evaluation.batch_size),
           Read(job, "/spec/suspend", spec.suspend),
           Read(job, "/spec/runPolicy/backoffLimit", spec.backoff_limit),
           ReadOptional(job, "/spec/runPolicy/activeDeadlineSeconds", spec.active_deadline_seconds),
           ReadOptional(job, "/spec/runPolicy/ttlSecondsAfterFinished",
                        spec.ttl_seconds_after_finished),
       }) {
    if (!status.ok()) return status.error();
  }
  if (const nlohmann::json::json_pointer pointer("/spec/template"); job.contains(pointer)) {
    Result<PodTemplate> pod_template = ParsePodTemplate(job.at(pointer));
    if (!pod_template.ok()) return pod_template.error();
    spec.pod_template = std::move(pod_template).value();
  }
  for (const nlohmann::json& variable : env) {
    spec.env.emplace_back(variable.value("name", ""), variable.value("value", ""));
  }
  // Two values for one name: Kubernetes would keep the later one (the template's) and warn.
  for (size_t i = 0; i < spec.pod_template.env.size(); ++i) {
    const std::string name = spec.pod_template.env[i]["name"].get<std::string>();
    if (std::any_of(spec.env.begin(), spec.env.end(),
                    [&](const auto& variable) { return variable.first == name; })) {
      return InvalidArgument("spec.template.spec.containers[0].env[" + std::to_string(i) + "].name",
                             name + " is also in spec.env: set it in one place");
    }
  }
  for (const auto& [product, cap] : caps)
    spec.max_workers_per_product[product] = static_cast<int>(cap);
  if (spec.name.empty() || spec.ns.empty() || spec.uid.empty())
    return InvalidArgument("metadata", "a stored HeteroTrainingJob has a name, namespace and uid");
  if (spec.global_batch < 1) return InvalidArgument("spec.globalBatchSize", "must be >= 1");
  if (spec.min_replicas < 1 || spec.min_replicas > spec.max_replicas)
    return InvalidArgument("spec.replicas", "needs 1 <= min <= max");
  // One trainer process drives one GPU; a second would be reserved and sit idle.
  if (spec.gpus_per_worker < 0 || spec.gpus_per_worker > 1)
    return InvalidArgument("spec.gpusPerWorker",
                           "must be 0 or 1 (a trainer pod runs one rank on one GPU): set "
                           "gpusPerWorker 1 and raise replicas.max instead");
  if (runtime == "python") {
    spec.runtime = Runtime::kPython;
    if (spec.command.empty())
      return InvalidArgument("spec.command",
                             "runtime python runs your script: set the command "
                             "that starts it, e.g. [python3, /app/train.py]");
    // The operator's CUDA image holds fulcrum-trainer, not CUDA PyTorch.
    if (spec.gpus_per_worker > 0 && spec.image.empty())
      return InvalidArgument("spec.image",
                             "a Python job on GPUs needs your image, with CUDA PyTorch and the "
                             "fulcrum package (pip install ./python; docs/python-runtime.md)");
  } else if (runtime != "trainer") {
    return InvalidArgument("spec.runtime", "is '" + runtime + "'; expected trainer or python");
  }
  if (spec.builtin_model.empty() == spec.torchscript_path.empty())
    return InvalidArgument("spec.model", "set exactly one of builtin and torchScriptPath");
  if (spec.batching.mode != "fixed" && spec.batching.mode != "adaptive")
    return InvalidArgument("spec.batching.mode",
                           "is '" + spec.batching.mode + "'; expected fixed or adaptive");
  if (spec.batching.mode == "adaptive" &&
      (spec.batching.min < spec.min_replicas || spec.batching.max < spec.batching.min))
    return InvalidArgument("spec.batching", "adaptive needs replicas.min <= min <= max");
  if (spec.batching.learning_rate_scaling != "adaScale" &&
      spec.batching.learning_rate_scaling != "sqrt")
    return InvalidArgument(
        "spec.batching.learningRateScaling",
        "is '" + spec.batching.learning_rate_scaling + "'; expected adaScale or sqrt");
  if (spec.steps.has_value() == spec.epochs.has_value())
    return InvalidArgument("spec.training", "set exactly one of steps and epochs");
  return spec;
}

}  // namespace fulcrum::controller
