#include "operator/controller/job_objects.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace fulcrum::controller {
namespace {

nlohmann::json Labels(const JobSpec& job) {
  return {{"app.kubernetes.io/name", "fulcrum-trainer"},
          {"app.kubernetes.io/managed-by", "fulcrum-operator"},
          {kJobLabel, job.name}};
}

nlohmann::json Metadata(const JobSpec& job, const std::string& name) {
  return {{"name", name},
          {"namespace", job.ns},
          {"labels", Labels(job)},
          {"ownerReferences", {OwnerReference(job)}}};
}

std::string Number(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

nlohmann::json FieldEnv(const std::string& name, const std::string& path) {
  return {{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

// Required: the product label exists (GPU workers) and passes the selector. Preferred: faster
// products, weight 1..100 in proportion to the prior speed.
nlohmann::json NodeAffinity(const JobSpec& job, const TrainerPodOptions& options) {
  nlohmann::json affinity = nlohmann::json::object();
  if (job.gpus_per_worker == 0) return affinity;
  nlohmann::json expressions = {{{"key", options.keys.product}, {"operator", "Exists"}}};
  if (!job.gpu_selector.allowed.empty()) {
    expressions.push_back(
        {{"key", options.keys.product}, {"operator", "In"}, {"values", job.gpu_selector.allowed}});
  }
  if (!job.gpu_selector.denied.empty()) {
    expressions.push_back({{"key", options.keys.product},
                           {"operator", "NotIn"},
                           {"values", job.gpu_selector.denied}});
  }
  nlohmann::json term = {{"matchExpressions", expressions}};
  if (!options.excluded_nodes.empty()) {
    term["matchFields"] = {
        {{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", options.excluded_nodes}}};
  }
  affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {{"nodeSelectorTerms", {term}}};
  auto speeds = options.product_speeds;
  std::stable_sort(speeds.begin(), speeds.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  const double fastest = speeds.empty() ? 0.0 : speeds.front().second;
  nlohmann::json preferred = nlohmann::json::array();
  for (const auto& [product, speed] : speeds) {
    if (fastest <= 0.0 || !job.gpu_selector.Admits(product)) continue;
    const int weight = std::clamp(static_cast<int>(std::lround(100.0 * speed / fastest)), 1, 100);
    preferred.push_back(
        {{"weight", weight},
         {"preference",
          {{"matchExpressions",
            {{{"key", options.keys.product}, {"operator", "In"}, {"values", {product}}}}}}}});
  }
  if (!preferred.empty()) affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred;
  return affinity;
}

}  // namespace

std::string TokenSecretName(const JobSpec& job) {
  return job.name + "-token";
}
std::string ServiceName(const JobSpec& job) {
  return job.name + "-workers";
}
std::string NetworkPolicyName(const JobSpec& job) {
  return job.name + "-trainers";
}
std::string WorkerPodName(const JobSpec& job, int worker) {
  return job.name + "-worker-" + std::to_string(worker);
}

nlohmann::json OwnerReference(const JobSpec& job) {
  return {{"apiVersion", "fulcrum.dev/v1alpha1"},
          {"kind", "HeteroTrainingJob"},
          {"name", job.name},
          {"uid", job.uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

nlohmann::json TokenSecret(const JobSpec& job, const std::string& token,
                           const std::string& coordinator_ca) {
  nlohmann::json secret = {{"apiVersion", "v1"},
                           {"kind", "Secret"},
                           {"metadata", Metadata(job, TokenSecretName(job))},
                           {"type", "Opaque"},
                           {"stringData", {{"token", token}}}};
  if (!coordinator_ca.empty()) secret["stringData"]["ca.crt"] = coordinator_ca;
  return secret;
}

nlohmann::json HeadlessService(const JobSpec& job) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(job, ServiceName(job))},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", {{kJobLabel, job.name}}},
            // Workers find each other before they are ready (the rendezvous comes first).
            {"publishNotReadyAddresses", true},
            {"ports",
             {{{"name", "metrics"},
               {"port", kTrainerMetricsPort},
               {"targetPort", kTrainerMetricsPort}}}}}}};
}

nlohmann::json TrainerNetworkPolicy(const JobSpec& job) {
  const nlohmann::json job_pods = {{"matchLabels", {{kJobLabel, job.name}}}};
  return {{"apiVersion", "networking.k8s.io/v1"},
          {"kind", "NetworkPolicy"},
          {"metadata", Metadata(job, NetworkPolicyName(job))},
          {"spec",
           {{"podSelector", job_pods},
            {"policyTypes", {"Ingress"}},
            {"ingress",
             {{{"from", {{{"podSelector", job_pods}}}}},
              {{"ports", {{{"protocol", "TCP"}, {"port", kTrainerMetricsPort}}}}}}}}}};
}

namespace {

std::string CommaSeparated(const std::vector<double>& values) {
  std::string text;
  for (double value : values) text += (text.empty() ? "" : ",") + Number(value);
  return text;
}

void AddPackedDatasetArgs(const PackedDatasetSpec& packed, std::vector<std::string>& args) {
  auto add = [&args](std::initializer_list<std::string> more) { args.insert(args.end(), more); };
  add({"--dataset", packed.path});
  if (!packed.input_field.empty()) add({"--input-field", packed.input_field});
  if (!packed.label_field.empty()) add({"--label-field", packed.label_field});
  if (packed.scale) add({"--input-scale", Number(*packed.scale)});
  if (!packed.mean.empty()) {
    add({"--normalize-mean", CommaSeparated(packed.mean), "--normalize-std",
         CommaSeparated(packed.std)});
  }
  if (packed.crop_padding > 0) add({"--random-crop-padding", std::to_string(packed.crop_padding)});
  if (packed.horizontal_flip) add({"--horizontal-flip", "true"});
}

}  // namespace

std::string TrainerImage(const JobSpec& job, const TrainerPodOptions& options) {
  if (!job.image.empty()) return job.image;
  return job.gpus_per_worker > 0 && !options.emulated_gpus ? options.default_cuda_image
                                                           : options.default_image;
}

std::vector<std::string> TrainerArgs(const JobSpec& job, bool coordinator_tls,
                                     const std::string& gpu_device) {
  std::vector<std::string> args = {"--coordinator",  "$(FULCRUM_COORDINATOR)",
                                   "--token-file",   std::string(kTokenMountPath) + "/token",
                                   "--job",          job.CoordinatorJobName(),
                                   "--pod",          "$(POD_NAME)",
                                   "--node",         "$(NODE_NAME)",
                                   "--host",         "$(POD_IP)",
                                   "--metrics-port", std::to_string(kTrainerMetricsPort)};
  auto add = [&args](std::initializer_list<std::string> more) { args.insert(args.end(), more); };
  if (coordinator_tls) {
    add({"--coordinator-ca", std::string(kTokenMountPath) + "/ca.crt"});
  } else {
    add({"--coordinator-insecure", "true"});
  }
  add({"--device", job.gpus_per_worker == 0 ? std::string("cpu") : gpu_device});
  if (!job.torchscript_path.empty()) {
    add({"--model", "torchscript", "--torchscript", job.torchscript_path});
  } else {
    add({"--model", job.builtin_model});
  }
  if (!job.packed.path.empty()) {
    AddPackedDatasetArgs(job.packed, args);
  } else if (!job.record_file.empty()) {
    add({"--data-file", job.record_file, "--record-features",
         std::to_string(job.features_per_record)});
  } else {
    add({"--dataset-size", std::to_string(job.synthetic_samples)});
  }
  // Epochs are counted by the trainers in samples (they know the dataset's size), so they stay
  // exact when globalBatchSize is edited.
  if (job.epochs) {
    add({"--epochs", std::to_string(*job.epochs)});
  } else {
    add({"--steps", std::to_string(job.steps.value_or(0))});
  }
  add({"--seed", std::to_string(job.seed), "--optimizer", job.optimizer, "--lr",
       Number(job.learning_rate)});
  if (job.momentum) add({"--momentum", Number(*job.momentum)});
  if (job.nesterov) add({"--nesterov", "true"});
  if (job.weight_decay > 0) add({"--weight-decay", Number(job.weight_decay)});
  if (job.gradient_clip_norm) add({"--clip-grad-norm", Number(*job.gradient_clip_norm)});
  if (job.precision != "fp32") add({"--precision", job.precision});
  if (job.channels_last) add({"--channels-last", "true"});
  if (!job.schedule.kind.empty()) add({"--lr-schedule", job.schedule.kind});
  if (job.schedule.warmup_steps > 0)
    add({"--warmup-steps", std::to_string(job.schedule.warmup_steps)});
  if (job.schedule.final_factor) add({"--lr-final-factor", Number(*job.schedule.final_factor)});
  if (job.schedule.step_size > 0) add({"--lr-step-size", std::to_string(job.schedule.step_size)});
  if (job.schedule.gamma) add({"--lr-gamma", Number(*job.schedule.gamma)});
  if (!job.checkpoint_path.empty()) add({"--checkpoint-dir", job.checkpoint_path});
  if (job.checkpoint_every > 0) add({"--checkpoint-every", std::to_string(job.checkpoint_every)});
  if (!job.init_from.empty()) add({"--init-from", job.init_from});
  if (!job.output_path.empty()) add({"--output-dir", job.output_path});
  if (!job.evaluation.dataset.empty()) {
    add({"--eval-dataset", job.evaluation.dataset});
    if (job.evaluation.every_steps > 0)
      add({"--eval-every", std::to_string(job.evaluation.every_steps)});
    if (job.evaluation.batch_size > 0)
      add({"--eval-batch-size", std::to_string(job.evaluation.batch_size)});
  }
  args.insert(args.end(), job.args.begin(), job.args.end());
  return args;
}

std::vector<std::pair<std::string, std::string>> PythonRuntimeEnv(const JobSpec& job,
                                                                  bool coordinator_tls,
                                                                  const std::string& gpu_device) {
  // What fulcrum-trainer gets as flags, named as python/fulcrum/pod_environment.py reads them.
  std::vector<std::pair<std::string, std::string>> env = {
      {"FULCRUM_JOB", job.CoordinatorJobName()},
      {"FULCRUM_TOKEN_FILE", std::string(kTokenMountPath) + "/token"},
      {"FULCRUM_DEVICE", job.gpus_per_worker == 0 ? std::string("cpu") : gpu_device},
      {"FULCRUM_SEED", std::to_string(job.seed)},
      {"FULCRUM_METRICS_PORT", std::to_string(kTrainerMetricsPort)}};
  if (coordinator_tls) {
    env.emplace_back("FULCRUM_COORDINATOR_CA", std::string(kTokenMountPath) + "/ca.crt");
  } else {
    env.emplace_back("FULCRUM_COORDINATOR_INSECURE", "true");
  }
  if (job.epochs) {
    env.emplace_back("FULCRUM_EPOCHS", std::to_string(*job.epochs));
  } else {
    env.emplace_back("FULCRUM_STEPS", std::to_string(job.steps.value_or(0)));
  }
  if (!job.checkpoint_path.empty()) env.emplace_back("FULCRUM_CHECKPOINT_DIR", job.checkpoint_path);
  if (job.checkpoint_every > 0)
    env.emplace_back("FULCRUM_CHECKPOINT_EVERY", std::to_string(job.checkpoint_every));
  if (!job.init_from.empty()) env.emplace_back("FULCRUM_INIT_FROM", job.init_from);
  if (!job.output_path.empty()) env.emplace_back("FULCRUM_OUTPUT_DIR", job.output_path);
  return env;
}

nlohmann::json TrainerPod(const JobSpec& job, int worker, const TrainerPodOptions& options) {
  nlohmann::json metadata = Metadata(job, WorkerPodName(job, worker));
  metadata["labels"][kWorkerLabel] = std::to_string(worker);
  nlohmann::json env = {FieldEnv("POD_NAME", "metadata.name"),
                        FieldEnv("POD_IP", "status.podIP"),
                        FieldEnv("NODE_NAME", "spec.nodeName"),
                        {{"name", "FULCRUM_COORDINATOR"}, {"value", options.coordinator_address}},
                        // Named in the trainer's error when the image cannot use the device.
                        {{"name", "FULCRUM_IMAGE"}, {"value", TrainerImage(job, options)}}};
  const std::string gpu_device = options.emulated_gpus ? "cpu" : "cuda";
  const bool python = job.runtime == Runtime::kPython;
  if (python) {
    for (const auto& [name, value] : PythonRuntimeEnv(job, options.coordinator_tls, gpu_device))
      env.push_back({{"name", name}, {"value", value}});
  }
  for (const auto& [name, value] : job.env) env.push_back({{"name", name}, {"value", value}});
  nlohmann::json container = {
      {"name", "trainer"},
      {"image", TrainerImage(job, options)},
      // A Python job's script takes its own arguments; the job reaches it through FULCRUM_*.
      {"args", python ? job.args : TrainerArgs(job, options.coordinator_tls, gpu_device)},
      {"env", env},
      {"ports", {{{"name", "metrics"}, {"containerPort", kTrainerMetricsPort}}}},
      {"volumeMounts",
       {{{"name", kTokenVolumeName}, {"mountPath", kTokenMountPath}, {"readOnly", true}}}},
      // A trainer that fails leaves its last log lines (its error, as a JSON line) in the pod's
      // status, where the operator reads why, e.g. a refused dataset (worker_plan.h).
      {"terminationMessagePolicy", "FallbackToLogsOnError"}};
  if (!job.command.empty()) container["command"] = job.command;
  nlohmann::json spec = {
      // The operator replaces a failed worker itself (with back-off and backoffLimit).
      {"restartPolicy", "Never"},
      {"hostname", WorkerPodName(job, worker)},
      {"subdomain", ServiceName(job)},
      {"containers", {container}},
      {"volumes",
       {{{"name", kTokenVolumeName}, {"secret", {{"secretName", TokenSecretName(job)}}}}}},
      {"tolerations",
       {{{"key", options.keys.resource}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}}};
  if (nlohmann::json affinity = NodeAffinity(job, options); !affinity.empty()) {
    spec["affinity"] = {{"nodeAffinity", affinity}};
  }
  nlohmann::json pod = {
      {"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", spec}};
  // The user's part (spec.template) joins the operator's; the GPU resource is set there.
  MergePodTemplate(job.pod_template, options.keys, job.gpus_per_worker, pod);
  return pod;
}

}  // namespace fulcrum::controller
