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
  EXPECT_EQ(container["image"], "fulcrum-trainer");
  EXPECT_EQ(container["resources"]["limits"]["nvidia.com/gpu"], "1");
  EXPECT_EQ(container["resources"]["requests"]["nvidia.com/gpu"], "1");
  EXPECT_THAT(container["env"],
              Contains(nlohmann::json{{"name", "FULCRUM_COORDINATOR"},
                                      {"value", "fulcrum-operator.fulcrum-system.svc:7070"}}));
  EXPECT_THAT(container["env"],
              Contains(nlohmann::json{{"name", "OMP_NUM_THREADS"}, {"value", "1"}}));
  EXPECT_EQ(pod["spec"]["volumes"][0]["secret"]["secretName"], "mixed-gpus-token");

  const std::vector<std::string> args = Args(pod);
  EXPECT_EQ(FlagValue(args, "--coordinator"), "$(FULCRUM_COORDINATOR)");
  EXPECT_EQ(FlagValue(args, "--token-file"), "/var/run/fulcrum/token/token");
  EXPECT_EQ(FlagValue(args, "--job"), "team-a/mixed-gpus");
  EXPECT_EQ(FlagValue(args, "--host"), "$(POD_IP)");
  EXPECT_EQ(FlagValue(args, "--model"), "cnn");
  EXPECT_EQ(FlagValue(args, "--steps"), "600");
  EXPECT_EQ(FlagValue(args, "--momentum"), "0.9");
  EXPECT_EQ(FlagValue(args, "--checkpoint-every"), "100");
  EXPECT_EQ(args.back(), "16");                // the user's args come last, so they win
  EXPECT_EQ(FlagValue(args, "--device"), "");  // auto: cuda when the pod sees a GPU

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
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("resources"));
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
    EXPECT_EQ(flags->device, cpu ? trainer::DeviceKind::kCpu : trainer::DeviceKind::kAuto);
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

}  // namespace
}  // namespace fulcrum::controller
