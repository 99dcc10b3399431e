// The HeteroTrainingJob reconciler: key in ("namespace/name"), result out. Each pass observes
// (the informers' caches, the node inventory, the coordinator's view of the training), decides
// with pure functions (live_decision, worker_plan, placement, job_lifecycle, job_status) and
// acts through two small interfaces: JobWriter (the token Secret, Service, NetworkPolicy, trainer
// Pods, status and Events) and the coordinator's JobRegistry. Level-triggered and idempotent:
// running it twice on an unchanged world writes nothing (docs/operator.md, "The reconcile loop").
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "common/result.h"
#include "operator/controller/job_objects.h"
#include "operator/controller/job_spec.h"
#include "operator/controller/job_writer.h"
#include "operator/controller/live_decision.h"
#include "operator/controller/node_inventory.h"
#include "operator/controller/pod_gpu_usage.h"
#include "operator/controller/status_writer.h"
#include "operator/controller/worker_plan.h"
#include "operator/coordinator/job_registry.h"
#include "operator/kube/cache/decoded_objects.h"
#include "operator/kube/cache/store.h"

namespace fulcrum::controller {

inline constexpr const char* kFinalizer = "fulcrum.dev/coordinator";
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByValue = "fulcrum-operator";

// The caches the reconciler reads; the informers behind them are the operator's.
struct ReconcilerCaches {
  const kube::Store* jobs = nullptr;              // HeteroTrainingJobs
  const kube::Store* pods = nullptr;              // trainer pods of every job (managed-by label)
  const kube::Store* secrets = nullptr;           // the jobs' token Secrets
  const kube::Store* services = nullptr;          // the jobs' headless Services
  const kube::Store* network_policies = nullptr;  // the jobs' NetworkPolicies
};

struct ReconcilerOptions {
  std::string default_image = "fulcrum-trainer";
  std::string default_cuda_image = "fulcrum-trainer-cuda";
  bool emulated_gpus = false;  // TrainerPodOptions::emulated_gpus
  // The least compute capability (major*10+minor) default_cuda_image has kernels for: torch
  // 2.11 cu130 builds for 7.5 and newer. GPU jobs' workers go to no node below it.
  int min_compute_capability = 75;
  std::string coordinator_address;  // host:port the trainers dial
  // The coordinator's CA certificate (PEM), given to trainers in their token Secret; "" when
  // the coordinator serves plaintext (--coordinator-insecure).
  std::string coordinator_ca;
  GpuLabelKeys keys;
  std::chrono::milliseconds status_min_interval{5'000};
  // A job that trains is reconciled again this often, to carry the coordinator's progress
  // into its status and metrics (the coordinator is not a watched resource). What else changes
  // (a generation, a plan) queues the job at once (CoordinatorService::SetJobChangeObserver),
  // so this only paces progress, which status.minInterval paces anyway: every 3 s cost a
  // running job's reconcile (building its status) once more per 5 s for nothing.
  std::chrono::milliseconds running_resync{5'000};
  // How long a trainer gets to checkpoint and exit after a STOP (suspend) before its pod is
  // deleted anyway.
  std::chrono::milliseconds stop_grace{60'000};
};

// What the metrics see of each job as it is reconciled.
struct JobObserver {
  // `worker_failures`: the entries of status.workerFailures so far.
  std::function<void(const std::string& ns, const std::string& name, JobPhase phase,
                     const coordinator::JobSessionSnapshot& training, std::size_t worker_failures)>
      updated;
  std::function<void(const std::string& ns, const std::string& name)> removed;
};

struct ReconcileResult {
  std::optional<std::chrono::milliseconds> requeue_after;
};

class JobReconciler {
 public:
  JobReconciler(JobWriter& writer, ReconcilerCaches caches, const NodeInventory& inventory,
                coordinator::JobRegistry& coordinator, ReconcilerOptions options,
                JobObserver observer = {});

  Result<ReconcileResult> Reconcile(const std::string& key);

 private:
  Result<ReconcileResult> ReconcileInvalid(const nlohmann::json& job, const Error& invalid);
  Result<ReconcileResult> ReconcileLive(const nlohmann::json& job, const JobSpec& spec);
  Result<ReconcileResult> Finish(const nlohmann::json& job, const JobSpec& spec,
                                 const nlohmann::json& status);
  Status Delete(const nlohmann::json& job, const JobSpec& spec);

  // Observe: what a live job needs before its pods (token Secret, Service, NetworkPolicy, its
  // session in the coordinator, edits applied), then where its training stands.
  Result<coordinator::JobSessionSnapshot> EnsureRegistered(const JobSpec& spec);
  // The job's pods and their nodes, the stored status and the training.
  Result<LiveWorld> Observe(const nlohmann::json& job, const JobSpec& spec,
                            coordinator::JobSessionSnapshot training);
  // Act: the pods decided on (deleted, stopped, created) and their Events.
  Status ActOnPods(const nlohmann::json& job, const JobSpec& spec, const LiveWorld& world,
                   const LiveDecision& decision);
  Status CreateWorkers(const nlohmann::json& job, const JobSpec& spec, const LiveWorld& world,
                       const LiveDecision& decision);

  // The job's worker-pod memo (made on first use; shared, so the lock is not held while decoding)
  // and its removal once the job is gone or finished.
  std::shared_ptr<kube::DecodedObjects<WorkerPod>> WorkerPodsOf(const std::string& job_key);
  void ForgetWorkerPods(const std::string& job_key);
  Status EnsureFinalizer(const nlohmann::json& job);
  Result<std::string> EnsureToken(const JobSpec& spec);
  // Creates the job's object `name` of `type` (built by `make`) unless `cache` has it; another
  // writer having created it meanwhile is fine.
  Status EnsureCreated(const kube::Store& cache, const kube::ResourceType& type,
                       const JobSpec& spec, const std::string& name,
                       const std::function<nlohmann::json()>& make);
  // The spec new workers are placed by: PlacementSpec, without the GPU products the CUDA image
  // cannot run (`unsupported`, when asked for, gets them).
  JobSpec Placement(const JobSpec& spec, const std::vector<WorkerPod>& pods,
                    std::map<std::string, int>* unsupported = nullptr) const;
  // The GPU product of each node `pods` are on, from the inventory.
  std::map<std::string, std::string> ProductsOf(const std::vector<WorkerPod>& pods) const;
  // Worker slots left for the job on nodes it may use (placement.h), from the inventory and
  // every trainer pod's GPUs.
  int CountFreeSlots(const JobSpec& spec, const LiveWorld& world) const;

  JobWriter& writer_;
  ReconcilerCaches caches_;
  const NodeInventory& inventory_;
  coordinator::JobRegistry& coordinator_;
  ReconcilerOptions options_;
  JobObserver observer_;
  StatusWriter status_;

  // Every trainer pod's node and GPUs, decoded once per version (free slots are counted over
  // all of them).
  mutable PodGpuUsage pod_gpu_usage_;  // a cache: CountFreeSlots is const
  // Each job's worker pods as the reconcile reads them, decoded once per pod version, by job key
  // (ns/name); a job's entry goes when the job does.
  std::mutex worker_pods_mutex_;
  std::map<std::string, std::shared_ptr<kube::DecodedObjects<WorkerPod>>> worker_pods_;
};

}  // namespace fulcrum::controller
