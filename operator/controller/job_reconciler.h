// The HeteroTrainingJob reconciler: key in ("namespace/name"), result out. It reads the world
// from the informers' caches and the hosted coordinator, decides with pure functions
// (job_spec, job_objects, worker_plan, job_status) and acts through the API: the token
// Secret, the headless Service, the trainer Pods, the coordinator registration, status
// (rate-limited) and Events. Level-triggered and idempotent: running it twice changes
// nothing (docs/operator.md, "The reconcile loop").
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
#include "operator/controller/node_inventory.h"
#include "operator/controller/pod_gpu_usage.h"
#include "operator/controller/worker_plan.h"
#include "operator/coordinator/coordinator_service.h"
#include "operator/kube/cache/decoded_objects.h"
#include "operator/kube/cache/store.h"
#include "operator/kube/client/api_client.h"
#include "operator/kube/events/event_recorder.h"

namespace fulcrum::controller {

inline constexpr const char* kFinalizer = "fulcrum.dev/coordinator";
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kManagedByValue = "fulcrum-operator";

kube::ResourceType HeteroTrainingJobs();

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
  std::function<void(const std::string& ns, const std::string& name, const std::string& phase,
                     const coordinator::JobSessionSnapshot& training, std::size_t worker_failures)>
      updated;
  std::function<void(const std::string& ns, const std::string& name)> removed;
};

struct ReconcileResult {
  std::optional<std::chrono::milliseconds> requeue_after;
};

class JobReconciler {
 public:
  JobReconciler(std::shared_ptr<kube::ApiClient> client, ReconcilerCaches caches,
                const NodeInventory& inventory, coordinator::CoordinatorService& coordinator,
                kube::EventRecorder* events, ReconcilerOptions options, JobObserver observer = {});

  Result<ReconcileResult> Reconcile(const std::string& key);

 private:
  struct Written {
    int64_t resource_version = 0;
    nlohmann::json status;
    std::chrono::steady_clock::time_point at;
  };
  Result<ReconcileResult> ReconcileLive(const nlohmann::json& job, const JobSpec& spec);
  Result<ReconcileResult> Finish(const nlohmann::json& job, const JobSpec& spec,
                                 const nlohmann::json& status);
  Status Delete(const nlohmann::json& job, const JobSpec& spec);
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
  // Worker slots for this job on nodes it may use (not `excluded`), left by every trainer pod.
  int FreeSlots(const JobSpec& spec, const std::vector<WorkerPod>& own_pods,
                const std::set<std::string>& excluded) const;
  TrainerPodOptions PodOptions(const JobSpec& spec) const;
  // The spec new pods are placed by: gpuSelector plus the products whose
  // maxWorkersPerProduct the job's placed workers already reach.
  JobSpec PlacementSpec(const JobSpec& spec, const std::vector<WorkerPod>& own_pods) const;
  // The stored status, or the one this reconciler wrote last if the cache has not caught up.
  nlohmann::json CurrentStatus(const nlohmann::json& job);
  // Writes `status` if it differs from the stored one in a way users notice, or differs at
  // all and the last write is status_min_interval old. Returns when to look again.
  Result<std::optional<std::chrono::milliseconds>> WriteStatus(const nlohmann::json& job,
                                                               const nlohmann::json& status);
  void Event(const nlohmann::json& regarding, bool warning, const std::string& reason,
             const std::string& action, const std::string& note);

  std::shared_ptr<kube::ApiClient> client_;
  ReconcilerCaches caches_;
  const NodeInventory& inventory_;
  coordinator::CoordinatorService& coordinator_;
  kube::EventRecorder* events_;
  ReconcilerOptions options_;
  JobObserver observer_;

  std::mutex written_mutex_;
  std::map<std::string, Written> written_;  // by job uid
  // Every trainer pod's node and GPUs, decoded once per version (FreeSlots runs every
  // reconcile and sums over all of them).
  mutable PodGpuUsage pod_gpu_usage_;  // a cache: FreeSlots is const
  // Each job's worker pods as the reconcile reads them, decoded once per pod version, by job key
  // (ns/name); a job's entry goes when the job does.
  std::mutex worker_pods_mutex_;
  std::map<std::string, std::shared_ptr<kube::DecodedObjects<WorkerPod>>> worker_pods_;
};

}  // namespace fulcrum::controller
