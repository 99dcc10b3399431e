// The Kubernetes objects one HeteroTrainingJob owns, built from its spec: the per-job token
// Secret trainers authenticate to the coordinator with, the headless Service that names the
// workers, the NetworkPolicy that keeps other pods off the trainers' ports, and one trainer
// Pod per worker. Pure: spec in, objects out; the reconciler creates
// them (docs/operator.md, "Pod template").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "operator/controller/gpu_node.h"
#include "operator/controller/job_spec.h"

namespace fulcrum::controller {

inline constexpr const char* kJobLabel = "fulcrum.dev/job";
inline constexpr const char* kWorkerLabel = "fulcrum.dev/worker";
inline constexpr int kTrainerMetricsPort = 9400;

struct TrainerPodOptions {
  std::string default_image = "fulcrum-trainer";  // CPU jobs' image when the spec names none
  // GPU jobs' (gpusPerWorker > 0) image when the spec names none: the CUDA build. Their trainers
  // get --device cuda, so one that finds no GPU fails naming its node and image instead of
  // training on the host's CPUs while holding the GPUs.
  std::string default_cuda_image = "fulcrum-trainer-cuda";
  // The GPU nodes are emulated (fulcrum-local-node runs pods as local processes with emulated
  // speeds): GPU jobs get default_image and --device cpu.
  bool emulated_gpus = false;
  std::string coordinator_address;  // host:port the trainers dial
  // Trainers verify the coordinator against the CA in their token Secret (ca.crt); false: the
  // coordinator serves plaintext (--coordinator-insecure) and so must they.
  bool coordinator_tls = true;
  GpuLabelKeys keys;
  // Products on nodes that could run this job, with their prior speeds: the pod prefers
  // faster ones (preferred node affinity, weight by speed).
  std::vector<std::pair<std::string, double>> product_speeds;
  // Nodes the pod must not go to (the job released a worker there).
  std::vector<std::string> excluded_nodes;
};

std::string TokenSecretName(const JobSpec& job);
std::string ServiceName(const JobSpec& job);
std::string NetworkPolicyName(const JobSpec& job);
std::string WorkerPodName(const JobSpec& job, int worker);

nlohmann::json OwnerReference(const JobSpec& job);  // controller, blockOwnerDeletion
// With the coordinator's CA certificate as ca.crt beside the token ("" when it serves plaintext).
nlohmann::json TokenSecret(const JobSpec& job, const std::string& token,
                           const std::string& coordinator_ca = "");
nlohmann::json HeadlessService(const JobSpec& job);
// Who may reach the job's trainers: the job's own pods, on any port (rank 0's TCPStore, the
// collectives' connections); anyone, on the metrics port only (Prometheus). The TCPStore has no
// authentication of its own (docs/security.md). The operator needs no rule: trainers dial it.
nlohmann::json TrainerNetworkPolicy(const JobSpec& job);
// What a runtime python job's container gets besides the pod's own variables: the job, token, CA,
// device, steps or epochs, seed, metrics port and storage paths, as FULCRUM_* variables that the
// fulcrum Python package reads (docs/python-runtime.md has the table).
std::vector<std::pair<std::string, std::string>> PythonRuntimeEnv(
    const JobSpec& job, bool coordinator_tls = true, const std::string& gpu_device = "cuda");
// fulcrum-trainer's flags for this job (the operator's, then spec.args). `gpu_device`: what GPU
// jobs' trainers are told, "cuda" (or "cpu" on emulated GPU nodes).
std::vector<std::string> TrainerArgs(const JobSpec& job, bool coordinator_tls = true,
                                     const std::string& gpu_device = "cuda");
// The image a worker of `job` runs: spec.image, else the CUDA or the CPU default.
std::string TrainerImage(const JobSpec& job, const TrainerPodOptions& options);
nlohmann::json TrainerPod(const JobSpec& job, int worker, const TrainerPodOptions& options);

}  // namespace fulcrum::controller
