// A HeteroTrainingJob's spec read from the custom resource, and the Secret, Service and trainer
// Pods built from it.
#include "operator/controller/job_objects.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "trainer_image/trainer/trainer_flags.h"

namespace fulcrum::controller {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The mixed-gpus example as the API server stores it (defaults applied).
nlohmann::json MixedGpusJob() {
  return nlohmann::json::parse(R"({
    "apiVersion": "fulcrum.dev/v1alpha1", "kind": "HeteroTrainingJob",
    "metadata": {"name": "mixed-gpus", "namespace": "team-a", "uid": "u-123", "generation": 2},
    "spec": {
      "model": {"builtin": "cnn"},
      "dataset": {"synthetic": {"samples": 50000, "seed": 1}},
      "globalBatchSize": 96, "replicas": {"min": 2, "max": 3}, "gpusPerWorker": 1,
      "gpuSelector": {"allowedProducts": ["A100-SXM4-40GB", "V100-SXM2-16GB", "Tesla-T4"],
                      "deniedProducts": ["Tesla-K80"]},
      "balancing": {"policy": "optimal", "minGain": 0.05, "intervalSteps": 50},
      "training": {"steps": 600, "optimizer": "sgd", "learningRate": 0.05, "momentum": 0.9},
      "checkpoint": {"path": "/ckpt", "everySteps": 100},
      "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
      "args": ["--hidden", "16"], "suspend": false, "runPolicy": {"backoffLimit": 3}}})");
}

std::vector<std::string> Args(const nlohmann::json& pod) {
  return pod["spec"]["containers"][0]["args"].get<std::vector<std::string>>();
}

// The value after `flag` in `args`, or "" if absent.
std::string FlagValue(const std::vector<std::string>& args, const std::string& flag) {
  auto it = std::find(args.begin(), args.end(), flag);
  return it != args.end() && std::next(it) != args.end() ? *std::next(it) : "";
}

TEST(ParseJobSpec, ReadsTheStoredObject) {
  Result<JobSpec> spec = ParseJobSpec(MixedGpusJob());
  ASSERT_TRUE(spec.ok()) << spec.error().ToString();
  EXPECT_EQ(spec->CoordinatorJobName(), "team-a/mixed-gpus");
  EXPECT_EQ(spec->global_batch, 96);
  EXPECT_EQ(spec->max_replicas, 3);
  EXPECT_EQ(spec->steps, 600);
  EXPECT_THAT(spec->gpu_selector.denied, ElementsAre("Tesla-K80"));
  EXPECT_EQ(spec->momentum, 0.9);
}

TEST(ParseJobSpec, EpochsGoToTheTrainersAndBadFieldsAreNamed) {
  nlohmann::json job = MixedGpusJob();
  job["spec"]["training"] = {{"epochs", 2}, {"optimizer", "adam"}, {"learningRate", 0.001}};
  const std::vector<std::string> args = TrainerArgs(ParseJobSpec(job).value());
  EXPECT_EQ(FlagValue(args, "--epochs"), "2");
  EXPECT_EQ(std::find(args.begin(), args.end(), "--steps"), args.end());
  job["spec"]["globalBatchSize"] = "many";
  EXPECT_EQ(ParseJobSpec(job).error().field, "spec.globalBatchSize");
  job = MixedGpusJob();
  job["spec"]["replicas"]["min"] = 5;
  EXPECT_EQ(ParseJobSpec(job).error().field, "spec.replicas");
}

TEST(ParseJobSpec, MoreThanOneGpuPerWorkerIsRefusedBecauseTheRestWouldSitIdle) {
  // The CRD refuses it at admission; a job stored before that rule reaches InvalidSpec.
  nlohmann::json job = MixedGpusJob();
  job["spec"]["gpusPerWorker"] = 2;
  const Error error = ParseJobSpec(job).error();
  EXPECT_EQ(error.field, "spec.gpusPerWorker");
  EXPECT_THAT(error.message, HasSubstr("raise replicas.max"));
}

TEST(TrainerPod, RequestsGpusPrefersFasterProductsAndCarriesTheCoordinatorAndToken) {
  const JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  TrainerPodOptions options;
  options.coordinator_address = "fulcrum-operator.fulcrum-system.svc:7070";
  options.product_speeds = {
      {"Tesla-T4", 0.354}, {"A100-SXM4-40GB", 2.06}, {"Tesla-K80", 0.2}, {"V100-SXM2-16GB", 1.0}};
  const nlohmann::json pod = TrainerPod(job, 2, options);

  EXPECT_EQ(pod["metadata"]["name"], "mixed-gpus-worker-2");
  EXPECT_EQ(pod["metadata"]["namespace"], "team-a");
  EXPECT_EQ(pod["metadata"]["labels"][kJobLabel], "mixed-gpus");
  EXPECT_EQ(pod["metadata"]["labels"][kWorkerLabel], "2");
  const nlohmann::json& owner = pod["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["uid"], "u-123");
  EXPECT_EQ(owner["controller"], true);
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");
  EXPECT_EQ(pod["spec"]["subdomain"], "mixed-gpus-workers");

  const nlohmann::json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "fulcrum-trainer-cuda");
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(container["resources"]["requests"]["nvidia.com/gpu"], "1");
  EXPECT_THAT(container["env"],
              Contains(nlohmann::json{{"name", "FULCRUM_COORDINATOR"},
                                      {"value", "fulcrum-operator.fulcrum-system.svc:7070"}}));
  EXPECT_THAT(container["env"],
              Contains(nlohmann::json{{"name", "OMP_NUM_THREADS"}, {"value", "1"}}));
  EXPECT_EQ(pod["spec"]["volumes"][0]["secret"]["secretName"], "mixed-gpus-token");
  EXPECT_EQ(container["volumeMounts"][0],
            (nlohmann::json{
                {"name", "fulcrum-token"}, {"mountPath", kTokenMountPath}, {"readOnly", true}}));

  const std::vector<std::string> args = Args(pod);
  EXPECT_EQ(FlagValue(args, "--coordinator"), "$(FULCRUM_COORDINATOR)");
  EXPECT_EQ(FlagValue(args, "--token-file"), "/var/run/fulcrum/token/token");
  EXPECT_EQ(FlagValue(args, "--job"), "team-a/mixed-gpus");
  EXPECT_EQ(FlagValue(args, "--host"), "$(POD_IP)");
  EXPECT_EQ(FlagValue(args, "--model"), "cnn");
  EXPECT_EQ(FlagValue(args, "--steps"), "600");
  EXPECT_EQ(FlagValue(args, "--momentum"), "0.9");
  EXPECT_EQ(FlagValue(args, "--checkpoint-every"), "100");
  EXPECT_EQ(args.back(), "16");  // the user's args come last, so they win
  // A GPU job runs the CUDA image and is told so: no silent fallback to the host's CPUs.
  EXPECT_EQ(FlagValue(args, "--device"), "cuda");

  const nlohmann::json& affinity = pod["spec"]["affinity"]["nodeAffinity"];
  const nlohmann::json& required = affinity["requiredDuringSchedulingIgnoredDuringExecution"]
                                           ["nodeSelectorTerms"][0]["matchExpressions"];
  EXPECT_THAT(required, Contains(nlohmann::json{{"key", "nvidia.com/gpu.product"},
                                                {"operator", "NotIn"},
                                                {"values", {"Tesla-K80"}}}));
  const nlohmann::json& preferred = affinity["preferredDuringSchedulingIgnoredDuringExecution"];
  ASSERT_EQ(preferred.size(), 3u);  // the denied K80 is not preferred
  std::vector<std::pair<std::string, int>> weights;
  for (const nlohmann::json& term : preferred) {
    weights.emplace_back(term["preference"]["matchExpressions"][0]["values"][0], term["weight"]);
  }
  EXPECT_THAT(weights, ElementsAre(std::pair<std::string, int>{"A100-SXM4-40GB", 100},
                                   std::pair<std::string, int>{"V100-SXM2-16GB", 49},
                                   std::pair<std::string, int>{"Tesla-T4", 17}));
}

TEST(TrainerPod, GpuJobsGetTheCudaImageAndDeviceCudaAndCpuJobsTheCpuImage) {
  const JobSpec gpu_job = ParseJobSpec(MixedGpusJob()).value();
  TrainerPodOptions options;
  options.default_image = "registry.example/fulcrum-trainer:1";
  options.default_cuda_image = "registry.example/fulcrum-trainer-cuda:1";
  const nlohmann::json gpu_pod = TrainerPod(gpu_job, 0, options);
  const nlohmann::json& gpu_container = gpu_pod["spec"]["containers"][0];
  EXPECT_EQ(gpu_container["image"], "registry.example/fulcrum-trainer-cuda:1");
  EXPECT_EQ(FlagValue(Args(gpu_pod), "--device"), "cuda") << "never a silent CPU fallback";
  EXPECT_THAT(gpu_container["env"],
              Contains(nlohmann::json{{"name", "FULCRUM_IMAGE"},
                                      {"value", "registry.example/fulcrum-trainer-cuda:1"}}));

  nlohmann::json cpu = MixedGpusJob();
  cpu["spec"]["gpusPerWorker"] = 0;
  cpu["spec"].erase("gpuSelector");
  const nlohmann::json cpu_pod = TrainerPod(ParseJobSpec(cpu).value(), 0, options);
  EXPECT_EQ(cpu_pod["spec"]["containers"][0]["image"], "registry.example/fulcrum-trainer:1");
  EXPECT_EQ(FlagValue(Args(cpu_pod), "--device"), "cpu");

  // Emulated GPU nodes (fulcrum-local-node): the CPU image, told so.
  options.emulated_gpus = true;
  const nlohmann::json emulated = TrainerPod(gpu_job, 0, options);
  EXPECT_EQ(emulated["spec"]["containers"][0]["image"], "registry.example/fulcrum-trainer:1");
  EXPECT_EQ(FlagValue(Args(emulated), "--device"), "cpu");

  // The job's own image wins either way.
  nlohmann::json own = MixedGpusJob();
  own["spec"]["image"] = "team/trainer:7";
  options.emulated_gpus = false;
  EXPECT_EQ(TrainerPod(ParseJobSpec(own).value(), 0, options)["spec"]["containers"][0]["image"],
            "team/trainer:7");
}

// A runtime python job as stored (the CRD's defaults for model and dataset applied).
nlohmann::json PythonJob() {
  nlohmann::json job = MixedGpusJob();
  job["spec"]["runtime"] = "python";
  job["spec"]["gpusPerWorker"] = 0;
  job["spec"].erase("gpuSelector");
  job["spec"]["model"] = {{"builtin", "mlp"}};
  job["spec"]["command"] = {"python3", "/app/train.py"};
  job["spec"]["args"] = {"--epochs", "3"};
  return job;
}

// The value of the container's env variable `name`, or "" if absent.
std::string EnvValue(const nlohmann::json& pod, const std::string& name) {
  for (const nlohmann::json& variable : pod["spec"]["containers"][0]["env"]) {
    if (variable["name"] == name) return variable.value("value", "");
  }
  return "";
}

TEST(TrainerPod, APythonJobRunsTheUsersCommandWithOnlyItsArgsAndTheJobInFulcrumVariables) {
  const Result<JobSpec> job = ParseJobSpec(PythonJob());
  ASSERT_TRUE(job.ok()) << job.error().ToString();
  EXPECT_EQ(job->runtime, Runtime::kPython);
  TrainerPodOptions options;
  options.default_image = "registry.example/fulcrum-trainer:1";
  options.coordinator_address = "coordinator.fulcrum-system:7070";
  const nlohmann::json pod = TrainerPod(*job, 1, options);
  const nlohmann::json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["command"], (nlohmann::json{"python3", "/app/train.py"}));
  EXPECT_EQ(container["args"], (nlohmann::json{"--epochs", "3"})) << "no fulcrum-trainer flag";
  // The CPU trainer image carries the fulcrum package and CPU PyTorch.
  EXPECT_EQ(container["image"], "registry.example/fulcrum-trainer:1");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_COORDINATOR"), "coordinator.fulcrum-system:7070");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_JOB"), "team-a/mixed-gpus");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_TOKEN_FILE"), "/var/run/fulcrum/token/token");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_COORDINATOR_CA"), "/var/run/fulcrum/token/ca.crt");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_DEVICE"), "cpu");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_STEPS"), "600");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_EPOCHS"), "");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_CHECKPOINT_DIR"), "/ckpt");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_CHECKPOINT_EVERY"), "100");
  EXPECT_EQ(EnvValue(pod, "FULCRUM_METRICS_PORT"), "9400");
  EXPECT_EQ(EnvValue(pod, "OMP_NUM_THREADS"), "1") << "the job's own env stays";
  // Same placement, token volume and port as a fulcrum-trainer pod.
  EXPECT_EQ(container["volumeMounts"][0]["mountPath"], "/var/run/fulcrum/token");
  EXPECT_EQ(container["ports"][0]["containerPort"], kTrainerMetricsPort);

  nlohmann::json plaintext_epochs = PythonJob();
  plaintext_epochs["spec"]["training"] = {
      {"epochs", 4}, {"optimizer", "sgd"}, {"learningRate", 0.1}};
  options.coordinator_tls = false;
  const nlohmann::json other = TrainerPod(ParseJobSpec(plaintext_epochs).value(), 0, options);
  EXPECT_EQ(EnvValue(other, "FULCRUM_EPOCHS"), "4");
  EXPECT_EQ(EnvValue(other, "FULCRUM_STEPS"), "");
  EXPECT_EQ(EnvValue(other, "FULCRUM_COORDINATOR_INSECURE"), "true");
  EXPECT_EQ(EnvValue(other, "FULCRUM_COORDINATOR_CA"), "");
}

TEST(TrainerPod, APythonJobOnEmulatedGpusIsToldCpuAndOnRealGpusCuda) {
  nlohmann::json stored = PythonJob();
  stored["spec"]["gpusPerWorker"] = 1;
  stored["spec"]["image"] = "team/train:3";
  const JobSpec job = ParseJobSpec(stored).value();
  TrainerPodOptions options;
  EXPECT_EQ(EnvValue(TrainerPod(job, 0, options), "FULCRUM_DEVICE"), "cuda");
  EXPECT_EQ(TrainerPod(job, 0, options)["spec"]["containers"][0]["image"], "team/train:3");
  options.emulated_gpus = true;
  EXPECT_EQ(EnvValue(TrainerPod(job, 0, options), "FULCRUM_DEVICE"), "cpu");
}

TEST(ParseJobSpec, APythonJobNeedsItsCommandAndOnGpusItsOwnImage) {
  nlohmann::json no_command = PythonJob();
  no_command["spec"].erase("command");
  const Result<JobSpec> refused = ParseJobSpec(no_command);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.error().ToString(), HasSubstr("spec.command"));
  EXPECT_THAT(refused.error().ToString(), HasSubstr("python3, /app/train.py"));

  nlohmann::json gpus = PythonJob();
  gpus["spec"]["gpusPerWorker"] = 1;
  const Result<JobSpec> no_image = ParseJobSpec(gpus);
  ASSERT_FALSE(no_image.ok());
  EXPECT_THAT(no_image.error().ToString(), HasSubstr("spec.image"));
  EXPECT_THAT(no_image.error().ToString(), HasSubstr("CUDA PyTorch"));

  nlohmann::json unknown = PythonJob();
  unknown["spec"]["runtime"] = "jax";
  const Result<JobSpec> bad_runtime = ParseJobSpec(unknown);
  ASSERT_FALSE(bad_runtime.ok());
  EXPECT_THAT(bad_runtime.error().ToString(), HasSubstr("spec.runtime"));
  EXPECT_THAT(bad_runtime.error().ToString(), HasSubstr("trainer or python"));
}

TEST(TrainerPod, NodesWhereTheJobReleasedAWorkerAreExcluded) {
  const JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  TrainerPodOptions options;
  options.excluded_nodes = {"t4-node-0"};
  const nlohmann::json term = TrainerPod(
      job, 0, options)["spec"]["affinity"]["nodeAffinity"]
                      ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0];
  EXPECT_EQ(
      term["matchFields"][0],
      (nlohmann::json{{"key", "metadata.name"}, {"operator", "NotIn"}, {"values", {"t4-node-0"}}}));
  EXPECT_FALSE(term["matchExpressions"].empty()) << "the product rules still apply";
  options.excluded_nodes.clear();
  EXPECT_FALSE(
      TrainerPod(job, 0,
                 options)["spec"]["affinity"]["nodeAffinity"]
                         ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]
                             .contains("matchFields"));
}

TEST(TrainerPod, CpuWorkersAskForNoGpuAndTorchScriptJobsPassTheirFiles) {
  nlohmann::json stored = MixedGpusJob();
  stored["spec"]["gpusPerWorker"] = 0;
  stored["spec"].erase("gpuSelector");
  stored["spec"]["model"] = {{"torchScriptPath", "/data/model.pt"}};
  stored["spec"]["dataset"] = {
      {"recordFile", {{"path", "/data/r.bin"}, {"featuresPerRecord", 16}}}};
  const nlohmann::json pod = TrainerPod(ParseJobSpec(stored).value(), 0, {});
  const nlohmann::json& resources = pod["spec"]["containers"][0]["resources"];
  EXPECT_FALSE(resources["requests"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(resources.contains("limits"));
  EXPECT_FALSE(pod["spec"].contains("affinity"));
  const std::vector<std::string> args = Args(pod);
  EXPECT_EQ(FlagValue(args, "--device"), "cpu");
  EXPECT_EQ(FlagValue(args, "--model"), "torchscript");
  EXPECT_EQ(FlagValue(args, "--torchscript"), "/data/model.pt");
  EXPECT_EQ(FlagValue(args, "--data-file"), "/data/r.bin");
  EXPECT_EQ(FlagValue(args, "--record-features"), "16");
}

TEST(JobObjects, TheTokenSecretAndTheHeadlessServiceBelongToTheJob) {
  const JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  const nlohmann::json secret = TokenSecret(job, "s3cret");
  EXPECT_EQ(secret["metadata"]["name"], "mixed-gpus-token");
  EXPECT_EQ(secret["stringData"]["token"], "s3cret");
  EXPECT_EQ(secret["metadata"]["ownerReferences"][0]["name"], "mixed-gpus");
  const nlohmann::json service = HeadlessService(job);
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  EXPECT_EQ(service["spec"]["selector"][kJobLabel], "mixed-gpus");
  EXPECT_EQ(service["spec"]["publishNotReadyAddresses"], true);
}

TEST(JobObjects, TheNetworkPolicyAdmitsOnlyTheJobsOwnPodsExceptToTheMetricsPort) {
  const JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  const nlohmann::json policy = TrainerNetworkPolicy(job);
  EXPECT_EQ(policy["metadata"]["name"], "mixed-gpus-trainers");
  EXPECT_EQ(policy["metadata"]["namespace"], "team-a");
  EXPECT_EQ(policy["metadata"]["ownerReferences"][0]["uid"], "u-123");
  // It selects exactly what the job's pods carry.
  const nlohmann::json pod = TrainerPod(job, 0, {});
  for (const auto& [key, value] : policy["spec"]["podSelector"]["matchLabels"].items()) {
    EXPECT_EQ(pod["metadata"]["labels"][key], value) << key;
  }
  EXPECT_EQ(policy["spec"]["policyTypes"], nlohmann::json({"Ingress"}));
  const nlohmann::json& ingress = policy["spec"]["ingress"];
  ASSERT_EQ(ingress.size(), 2u);
  // Rule 1: any port, from the job's pods (in the job's namespace) only.
  EXPECT_FALSE(ingress[0].contains("ports"));
  ASSERT_EQ(ingress[0]["from"].size(), 1u);
  EXPECT_EQ(ingress[0]["from"][0],
            nlohmann::json({{"podSelector", policy["spec"]["podSelector"]}}));
  // Rule 2: from anywhere, the metrics port only.
  EXPECT_FALSE(ingress[1].contains("from"));
  EXPECT_EQ(ingress[1]["ports"], nlohmann::json::parse(R"([{"protocol": "TCP", "port": 9400}])"));
}

TEST(JobObjects, TrainersVerifyTheCoordinatorAgainstTheCaInTheirTokenSecretOrAreToldPlaintext) {
  const JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  const nlohmann::json secret = TokenSecret(job, "s3cret", "-----BEGIN CERTIFICATE-----\n...");
  EXPECT_EQ(secret["stringData"]["ca.crt"], "-----BEGIN CERTIFICATE-----\n...");
  EXPECT_FALSE(TokenSecret(job, "s3cret", "")["stringData"].contains("ca.crt"));
  TrainerPodOptions options;
  const std::vector<std::string> tls = Args(TrainerPod(job, 0, options));
  EXPECT_EQ(FlagValue(tls, "--coordinator-ca"), "/var/run/fulcrum/token/ca.crt");
  EXPECT_EQ(FlagValue(tls, "--coordinator-insecure"), "");
  options.coordinator_tls = false;
  const std::vector<std::string> plaintext = Args(TrainerPod(job, 0, options));
  EXPECT_EQ(FlagValue(plaintext, "--coordinator-insecure"), "true");
  EXPECT_EQ(FlagValue(plaintext, "--coordinator-ca"), "");
}

// fulcrum-trainer's own flag parser accepts the command line the pod template gives it (with
// the $(VAR) references as the kubelet would expand them).
TEST(TrainerArgs, TheTrainerAcceptsTheOperatorsCommandLine) {
  for (bool cpu : {false, true}) {
    nlohmann::json stored = MixedGpusJob();
    if (cpu) {
      stored["spec"]["gpusPerWorker"] = 0;
      stored["spec"].erase("gpuSelector");
    }
    std::vector<std::string> args = TrainerArgs(ParseJobSpec(stored).value());
    for (std::string& arg : args) {
      if (arg == "$(FULCRUM_COORDINATOR)") arg = "10.0.0.1:7070";
      if (arg == "$(POD_NAME)") arg = "mixed-gpus-worker-0";
      if (arg == "$(NODE_NAME)") arg = "node-a";
      if (arg == "$(POD_IP)") arg = "10.1.2.3";
    }
    const Result<trainer::TrainerConfig> flags = trainer::ParseTrainerFlags(args);
    ASSERT_TRUE(flags.ok()) << flags.error().ToString();
    EXPECT_EQ(flags->steps, 600);
    EXPECT_EQ(flags->model.hidden, 16);  // the user's args
    EXPECT_EQ(flags->job, "team-a/mixed-gpus");
    EXPECT_EQ(flags->device, cpu ? trainer::DeviceKind::kCpu : trainer::DeviceKind::kCuda);
  }
}

// A packed dataset's directory, fields and device transforms, and the recipe's Nesterov
// momentum, weight decay and clipping, reach the trainer as flags it accepts, with epochs
// counted by the trainer.
TEST(TrainerArgs, APackedDatasetAndItsTransformsReachTheTrainer) {
  nlohmann::json stored = MixedGpusJob();
  stored["spec"]["dataset"] = nlohmann::json::parse(R"({"packed": {
      "path": "/data/cifar", "inputField": "image", "labelField": "label",
      "transforms": {"normalize": {"mean": [0.49, 0.48, 0.45], "std": [0.25, 0.24, 0.26]},
                     "randomCrop": {"padding": 4}, "horizontalFlip": true}}})");
  stored["spec"]["training"] = {{"epochs", 2},         {"optimizer", "sgd"},
                                {"learningRate", 0.1}, {"nesterov", true},
                                {"weightDecay", 5e-4}, {"gradientClipNorm", 1.5},
                                {"precision", "bf16"}, {"channelsLast", true}};
  stored["spec"]["training"]["schedule"] = {
      {"kind", "cosine"}, {"warmupSteps", 100}, {"finalFactor", 0.01}};
  std::vector<std::string> args = TrainerArgs(ParseJobSpec(stored).value());
  EXPECT_EQ(FlagValue(args, "--dataset"), "/data/cifar");
  EXPECT_EQ(FlagValue(args, "--dataset-size"), "");
  for (std::string& arg : args) {
    if (arg.starts_with("$(")) arg = "10.0.0.1:7070";
  }
  const Result<trainer::TrainerConfig> config = trainer::ParseTrainerFlags(args);
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->data.packed_dir, "/data/cifar");
  EXPECT_EQ(config->data.input_field, "image");
  EXPECT_EQ(config->epochs, 2);
  EXPECT_EQ(config->steps, 0);
  EXPECT_EQ(config->transform.mean, (std::vector<double>{0.49, 0.48, 0.45}));
  EXPECT_EQ(config->transform.std, (std::vector<double>{0.25, 0.24, 0.26}));
  EXPECT_EQ(config->transform.crop_padding, 4);
  EXPECT_TRUE(config->transform.horizontal_flip);
  EXPECT_TRUE(config->optimizer.nesterov);
  EXPECT_EQ(config->optimizer.weight_decay, 5e-4);
  EXPECT_EQ(config->clip_gradient_norm, 1.5);
  EXPECT_EQ(config->schedule.kind, trainer::ScheduleKind::kCosine);
  EXPECT_EQ(config->schedule.warmup_steps, 100);
  EXPECT_EQ(config->schedule.final_factor, 0.01);
  EXPECT_EQ(config->precision.precision, trainer::Precision::kBFloat16);
  EXPECT_TRUE(config->precision.channels_last);
}

// Fine-tuning weights, the output directory and the evaluation set reach the trainer as flags
// it accepts.
TEST(TrainerArgs, InitFromOutputAndEvaluationReachTheTrainer) {
  nlohmann::json stored = MixedGpusJob();
  stored["spec"]["initFrom"] = {{"path", "/models/base/model.pt"}};
  stored["spec"]["output"] = {{"path", "/models/tuned"}};
  stored["spec"]["evaluation"] = {
      {"dataset", "/data/held-out"}, {"everySteps", 50}, {"batchSize", 512}};
  std::vector<std::string> args = TrainerArgs(ParseJobSpec(stored).value());
  for (std::string& arg : args) {
    if (arg.starts_with("$(")) arg = "10.0.0.1:7070";
  }
  const Result<trainer::TrainerConfig> config = trainer::ParseTrainerFlags(args);
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->init_from, "/models/base/model.pt");
  EXPECT_EQ(config->output_dir, "/models/tuned");
  EXPECT_EQ(config->eval_dataset, "/data/held-out");
  EXPECT_EQ(config->eval_every, 50);
  EXPECT_EQ(config->eval_batch_size, 512);
}

// A template that sets every field a user may set, as in docs/user-guide.md ("The pod
// template").
nlohmann::json FullTemplate() {
  return nlohmann::json::parse(R"j({
    "metadata": {"labels": {"team": "vision"}, "annotations": {"example.com/owner": "ana"}},
    "spec": {
      "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
                  {"name": "scratch", "emptyDir": {}}],
      "serviceAccountName": "trainer",
      "imagePullSecrets": [{"name": "registry"}],
      "tolerations": [{"key": "team", "operator": "Equal", "value": "vision",
                       "effect": "NoSchedule"}],
      "nodeSelector": {"topology.kubernetes.io/zone": "eu-1a"},
      "affinity": {
        "nodeAffinity": {
          "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["training"]}]}]},
          "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 7, "preference": {"matchExpressions": [
              {"key": "disk", "operator": "In", "values": ["nvme"]}]}}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
          {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                           "labelSelector": {"matchLabels": {"team": "vision"}}}}]}},
      "priorityClassName": "training",
      "securityContext": {"runAsNonRoot": true, "fsGroup": 1000},
      "containers": [{
        "name": "trainer",
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": true},
                         {"name": "scratch", "mountPath": "/scratch"}],
        "env": [{"name": "WANDB_API_KEY",
                 "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "key"}}},
                {"name": "RUN", "value": "$(POD_NAME)"}],
        "envFrom": [{"configMapRef": {"name": "settings"}}],
        "resources": {"requests": {"cpu": "4", "memory": "16Gi"},
                      "limits": {"memory": "32Gi"}},
        "securityContext": {"allowPrivilegeEscalation": false}}]}})j");
}

JobSpec WithTemplate(const nlohmann::json& pod_template) {
  nlohmann::json stored = MixedGpusJob();
  stored["spec"]["template"] = pod_template;
  Result<JobSpec> spec = ParseJobSpec(stored);
  EXPECT_TRUE(spec.ok()) << spec.error().ToString();
  return spec.ok() ? *spec : ParseJobSpec(MixedGpusJob()).value();
}

const nlohmann::json& Trainer(const nlohmann::json& pod) {
  return pod["spec"]["containers"][0];
}

TEST(TrainerPodTemplate, EveryTemplateFieldAppearsOnTheTrainerPod) {
  const nlohmann::json user = FullTemplate();
  const nlohmann::json& user_spec = user["spec"];
  const nlohmann::json& user_trainer = user_spec["containers"][0];
  const nlohmann::json pod = TrainerPod(WithTemplate(user), 1, {});
  const nlohmann::json& spec = pod["spec"];
  const nlohmann::json& trainer = Trainer(pod);

  EXPECT_EQ(pod["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(pod["metadata"]["labels"][kJobLabel], "mixed-gpus");
  EXPECT_EQ(pod["metadata"]["annotations"]["example.com/owner"], "ana");
  // The token volume and mount first, then the user's.
  ASSERT_EQ(spec["volumes"].size(), 3u);
  EXPECT_EQ(spec["volumes"][0]["name"], kTokenVolumeName);
  EXPECT_EQ(spec["volumes"][1], user_spec["volumes"][0]);
  EXPECT_EQ(spec["volumes"][2], user_spec["volumes"][1]);
  ASSERT_EQ(trainer["volumeMounts"].size(), 3u);
  EXPECT_EQ(trainer["volumeMounts"][0]["mountPath"], kTokenMountPath);
  EXPECT_EQ(trainer["volumeMounts"][1], user_trainer["volumeMounts"][0]);
  EXPECT_EQ(trainer["volumeMounts"][2], user_trainer["volumeMounts"][1]);
  // The operator's env, spec.env, then the template's (valueFrom kept).
  EXPECT_EQ(trainer["env"][3]["name"], "FULCRUM_COORDINATOR");
  EXPECT_EQ(trainer["env"][4]["name"], "FULCRUM_IMAGE");
  EXPECT_EQ(trainer["env"][5]["name"], "OMP_NUM_THREADS");
  EXPECT_EQ(trainer["env"][6], user_trainer["env"][0]);
  EXPECT_EQ(trainer["env"][7], user_trainer["env"][1]);
  EXPECT_EQ(trainer["envFrom"], user_trainer["envFrom"]);
  EXPECT_EQ(trainer["securityContext"], user_trainer["securityContext"]);
  EXPECT_EQ(trainer["resources"]["requests"],
            (nlohmann::json{{"cpu", "4"}, {"memory", "16Gi"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(trainer["resources"]["limits"],
            (nlohmann::json{{"memory", "32Gi"}, {"nvidia.com/gpu", "1"}}));

  EXPECT_EQ(spec["serviceAccountName"], "trainer");
  EXPECT_EQ(spec["imagePullSecrets"], user_spec["imagePullSecrets"]);
  ASSERT_EQ(spec["tolerations"].size(), 2u);
  EXPECT_EQ(spec["tolerations"][0]["key"], "nvidia.com/gpu");  // the operator's stays
  EXPECT_EQ(spec["tolerations"][1], user_spec["tolerations"][0]);
  EXPECT_EQ(spec["nodeSelector"], user_spec["nodeSelector"]);
  EXPECT_EQ(spec["priorityClassName"], "training");
  EXPECT_EQ(spec["securityContext"], user_spec["securityContext"]);
  EXPECT_EQ(spec["affinity"]["podAntiAffinity"], user_spec["affinity"]["podAntiAffinity"]);
  const nlohmann::json& preferred =
      spec["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
  EXPECT_THAT(preferred, Contains(user_spec["affinity"]["nodeAffinity"]
                                           ["preferredDuringSchedulingIgnoredDuringExecution"][0]));
  // Still the operator's.
  EXPECT_EQ(spec["restartPolicy"], "Never");
  EXPECT_EQ(trainer["image"], "fulcrum-trainer-cuda");
  EXPECT_EQ(FlagValue(Args(pod), "--job"), "team-a/mixed-gpus");
}

// A node as the scheduler sees it, and whether a required node affinity selects it: the
// terms are ORed, the requirements inside one term ANDed (Kubernetes' NodeSelector).
struct Node {
  std::string name;
  std::map<std::string, std::string> labels;
};

bool Satisfies(const nlohmann::json& requirement, const std::optional<std::string>& value) {
  const std::string op = requirement["operator"];
  const auto values = requirement.value("values", std::vector<std::string>{});
  const bool listed = value && std::find(values.begin(), values.end(), *value) != values.end();
  if (op == "In") return listed;
  if (op == "NotIn") return !listed;
  if (op == "Exists") return value.has_value();
  if (op == "DoesNotExist") return !value.has_value();
  ADD_FAILURE() << "operator " << op << " not modelled";
  return false;
}

bool Selects(const nlohmann::json& node_affinity, const Node& node) {
  for (const nlohmann::json& term :
       node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]) {
    bool all = !term.value("matchExpressions", nlohmann::json::array()).empty() ||
               !term.value("matchFields", nlohmann::json::array()).empty();
    for (const nlohmann::json& requirement :
         term.value("matchExpressions", nlohmann::json::array())) {
      const auto label = node.labels.find(requirement["key"]);
      all = all && Satisfies(requirement, label == node.labels.end()
                                              ? std::nullopt
                                              : std::optional<std::string>(label->second));
    }
    for (const nlohmann::json& requirement : term.value("matchFields", nlohmann::json::array())) {
      EXPECT_EQ(requirement["key"], "metadata.name");
      all = all && Satisfies(requirement, node.name);
    }
    if (all) return true;
  }
  return false;
}

TEST(TrainerPodTemplate, TheUsersRequiredNodeAffinityIsAndedWithTheGpuPlacement) {
  // Two user terms (ORed): pool=training, or a node named "special".
  nlohmann::json user = nlohmann::json::parse(R"j({"spec": {"affinity": {"nodeAffinity": {
    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
      {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["training"]}]},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]}]}}}}})j");
  TrainerPodOptions options;
  options.excluded_nodes = {"released"};
  const nlohmann::json affinity =
      TrainerPod(WithTemplate(user), 0, options)["spec"]["affinity"]["nodeAffinity"];
  const std::string product = "nvidia.com/gpu.product";
  const std::vector<std::pair<Node, bool>> cases = {
      {{"a", {{product, "A100-SXM4-40GB"}, {"pool", "training"}}}, true},
      {{"special", {{product, "Tesla-T4"}}}, true},
      // Only one side matches: the GPU placement, or the user's affinity.
      {{"b", {{product, "A100-SXM4-40GB"}}}, false},
      {{"c", {{"pool", "training"}}}, false},
      {{"special", {}}, false},
      {{"d", {{product, "Tesla-K80"}, {"pool", "training"}}}, false},  // denied product
      {{"released", {{product, "A100-SXM4-40GB"}, {"pool", "training"}}}, false},
  };
  for (const auto& [node, selected] : cases) {
    EXPECT_EQ(Selects(affinity, node), selected) << node.name << " " << nlohmann::json(node.labels);
  }
  EXPECT_EQ(affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].size(),
            2u);
  // Without a template's affinity, the operator's placement alone.
  const nlohmann::json plain = TrainerPod(ParseJobSpec(MixedGpusJob()).value(), 0,
                                          options)["spec"]["affinity"]["nodeAffinity"];
  EXPECT_TRUE(Selects(plain, {"b", {{product, "A100-SXM4-40GB"}}}));
  // CPU workers have no placement of their own: the user's affinity as given.
  nlohmann::json cpu = MixedGpusJob();
  cpu["spec"]["gpusPerWorker"] = 0;
  cpu["spec"].erase("gpuSelector");
  cpu["spec"]["template"] = user;
  const nlohmann::json cpu_affinity =
      TrainerPod(ParseJobSpec(cpu).value(), 0, {})["spec"]["affinity"]["nodeAffinity"];
  EXPECT_TRUE(Selects(cpu_affinity, {"c", {{"pool", "training"}}}));
  EXPECT_FALSE(Selects(cpu_affinity, {"b", {{product, "A100-SXM4-40GB"}}}));
}

// What the CRD and ParsePodTemplate refuse is also kept off the pod by the merge itself, for a
// template that reached it some other way.
TEST(TrainerPodTemplate, TheOperatorsLabelsEnvVolumeAndGpusCannotBeOverridden) {
  PodTemplate user;
  user.labels = {{kJobLabel, "other-job"}, {"app.kubernetes.io/managed-by", "me"}, {"ok", "1"}};
  user.volumes = nlohmann::json::parse(R"j([{"name": "fulcrum-token", "emptyDir": {}}])j");
  user.volume_mounts = nlohmann::json::parse(
      R"j([{"name": "x", "mountPath": "/var/run/fulcrum/token"},
          {"name": "fulcrum-token", "mountPath": "/elsewhere"}])j");
  user.env = nlohmann::json::parse(
      R"j([{"name": "FULCRUM_COORDINATOR", "value": "evil:1"}, {"name": "POD_NAME", "value": "x"},
          {"name": "MINE", "value": "1"}])j");
  user.requests = {{"nvidia.com/gpu", "8"}};
  user.limits = {{"nvidia.com/gpu", "8"}};
  JobSpec job = ParseJobSpec(MixedGpusJob()).value();
  job.pod_template = user;
  TrainerPodOptions options;
  options.coordinator_address = "coordinator:7070";
  const nlohmann::json pod = TrainerPod(job, 0, options);
  EXPECT_EQ(pod["metadata"]["labels"][kJobLabel], "mixed-gpus");
  EXPECT_EQ(pod["metadata"]["labels"]["app.kubernetes.io/managed-by"], "fulcrum-operator");
  EXPECT_EQ(pod["metadata"]["labels"]["ok"], "1");
  ASSERT_EQ(pod["spec"]["volumes"].size(), 1u);
  EXPECT_EQ(pod["spec"]["volumes"][0]["secret"]["secretName"], "mixed-gpus-token");
  ASSERT_EQ(Trainer(pod)["volumeMounts"].size(), 1u);
  EXPECT_EQ(Trainer(pod)["volumeMounts"][0]["name"], kTokenVolumeName);
  int coordinators = 0;
  for (const nlohmann::json& variable : Trainer(pod)["env"]) {
    if (variable["name"] == "FULCRUM_COORDINATOR") {
      ++coordinators;
      EXPECT_EQ(variable["value"], "coordinator:7070");
    }
    if (variable["name"] == "POD_NAME") {
      EXPECT_TRUE(variable.contains("valueFrom"));
    }
  }
  EXPECT_EQ(coordinators, 1);
  EXPECT_THAT(Trainer(pod)["env"], Contains(nlohmann::json{{"name", "MINE"}, {"value", "1"}}));
  EXPECT_EQ(Trainer(pod)["resources"]["requests"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(Trainer(pod)["resources"]["limits"]["nvidia.com/gpu"], "1");
  // A CPU worker gets no GPU from a template either.
  job.gpus_per_worker = 0;
  const nlohmann::json cpu = TrainerPod(job, 0, options);
  EXPECT_FALSE(Trainer(cpu)["resources"]["requests"].contains("nvidia.com/gpu"));
  EXPECT_FALSE(Trainer(cpu)["resources"].contains("limits"));
  // With another vendor's resource configured, that one is the operator's.
  options.keys.resource = "amd.com/gpu";
  job.gpus_per_worker = 1;
  job.pod_template.requests = {{"amd.com/gpu", "8"}};
  EXPECT_EQ(Trainer(TrainerPod(job, 0, options))["resources"]["requests"]["amd.com/gpu"], "1");
}

TEST(TrainerPodTemplate, TrainersGetCpuAndMemoryRequestsWhenTheTemplateSetsNone) {
  const nlohmann::json pod = TrainerPod(ParseJobSpec(MixedGpusJob()).value(), 0, {});
  EXPECT_EQ(Trainer(pod)["resources"]["requests"],
            (nlohmann::json{{"cpu", kDefaultCpuRequest},
                            {"memory", kDefaultMemoryRequest},
                            {"nvidia.com/gpu", "1"}}));
  // A limit without a request: Kubernetes requests the limit, so no default is added (a
  // default above the limit would make the pod invalid).
  const nlohmann::json limited =
      TrainerPod(WithTemplate(nlohmann::json::parse(R"j({"spec": {"containers": [{"name": "trainer",
          "resources": {"limits": {"cpu": "500m"}}}]}})j")),
                 0, {});
  EXPECT_FALSE(Trainer(limited)["resources"]["requests"].contains("cpu"));
  EXPECT_EQ(Trainer(limited)["resources"]["requests"]["memory"], kDefaultMemoryRequest);
  EXPECT_EQ(Trainer(limited)["resources"]["limits"]["cpu"], "500m");
}

TEST(TrainerPodTemplate, TheUsersRequestsAreKeptBesideTheGpus) {
  const nlohmann::json pod =
      TrainerPod(WithTemplate(nlohmann::json::parse(R"j({"spec": {"containers": [{"name": "trainer",
          "resources": {"requests": {"cpu": 8, "memory": "64Gi", "ephemeral-storage": "10Gi"},
                        "limits": {"memory": "64Gi", "example.com/fpga": "1"}}}]}})j")),
                 0, {});
  EXPECT_EQ(
      Trainer(pod)["resources"]["requests"],
      (nlohmann::json{
          {"cpu", 8}, {"memory", "64Gi"}, {"ephemeral-storage", "10Gi"}, {"nvidia.com/gpu", "1"}}));
  EXPECT_EQ(
      Trainer(pod)["resources"]["limits"],
      (nlohmann::json{{"memory", "64Gi"}, {"example.com/fpga", "1"}, {"nvidia.com/gpu", "1"}}));
}

}  // namespace
}  // namespace fulcrum::controller
