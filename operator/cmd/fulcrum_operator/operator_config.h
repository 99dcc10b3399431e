// fulcrum-operator's settings: command-line flags and an optional YAML file (--config), the
// flags winning. Every setting has one YAML key and one flag, listed once (operator_config.cc),
// and every error names the key or flag and says what would be right.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"
#include "operator/controller/gpu_node.h"
#include "operator/coordinator/coordinator_service.h"

namespace fulcrum::operator_main {

struct LeaderElectionSettings {
  bool enabled = true;
  std::string lease_namespace = "fulcrum-system";
  std::string lease_name = "fulcrum-operator";
  std::string identity;  // default: the host name (the pod's name in a cluster)
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};
};

struct OperatorConfig {
  std::string kubeconfig;       // empty: in-cluster service account
  std::string watch_namespace;  // empty: every namespace
  std::string trainer_image = "fulcrum-trainer";
  // GPU jobs' trainers (gpusPerWorker > 0) run this image, told --device cuda.
  std::string trainer_cuda_image = "fulcrum-trainer-cuda";
  // The cluster's GPU nodes are emulated (fulcrum-local-node): GPU jobs get trainer_image and
  // --device cpu, and the emulated speeds stand in for the GPUs.
  bool emulated_gpus = false;
  // The least compute capability trainer_cuda_image runs on (major*10+minor; cu130: 75).
  int min_compute_capability = 75;
  std::string coordinator_listen = "0.0.0.0:7070";
  std::string coordinator_address;  // what trainers dial: the operator Service's host:port
  // NAMESPACE/NAME of a Service without selector whose EndpointSlice (named like it) the leader
  // points at coordinator_advertise_ip, so the Service always leads to the current leader.
  // Empty: none (trainers dial coordinator_address as it is).
  std::string coordinator_service;
  std::string coordinator_advertise_ip;               // this replica's pod IP
  coordinator::CoordinatorLimits coordinator_limits;  // what one client can hold (security.md)
  // NAMESPACE/NAME of the Secret with the coordinator's CA and serving certificate (made on
  // first start); or coordinator_insecure: plaintext, for local runs only.
  std::string coordinator_tls_secret;
  bool coordinator_insecure = false;
  std::string health_listen = "0.0.0.0:8081";
  std::string metrics_listen = "0.0.0.0:8080";
  LeaderElectionSettings leader_election;
  controller::GpuLabelKeys gpu_labels;
  std::vector<std::string> tolerated_taint_keys = {"nvidia.com/gpu"};
  // Per job, between progress-only status writes: one write per job per 5 s keeps 200 running
  // jobs at 40 writes/s to the API server (docs/benchmarks.md, "Operator at scale").
  std::chrono::milliseconds status_min_interval{5'000};
  int workers = 2;  // jobs reconciled at once
  // Client-side limit on requests to the API server. Starting a job takes about 15 requests
  // (pods, Secret, Service, NetworkPolicy, finalizer, an Event, status), so 50/s starts 200
  // jobs in a minute; kube-scheduler's defaults, where controller-runtime's 20/30 took 225 s
  // (docs/benchmarks.md, "Operator at scale").
  double kube_api_qps = 50;
  int kube_api_burst = 100;
};

// `args` without the program name. Help (--help) comes back as kFailedPrecondition with the
// usage text as its message.
Result<OperatorConfig> ParseOperatorConfig(const std::vector<std::string>& args,
                                           const std::string& host_name);

}  // namespace fulcrum::operator_main
