// The HeteroTrainingJob controller: informers for jobs, their pods, Secrets and Services, and
// Nodes (the inventory); a rate-limited work queue of job keys; worker threads that run the
// reconciler. Informers run on every replica so a new leader starts with warm caches; only
// Run (the leader) reconciles.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <vector>

#include "operator/controller/job_reconciler.h"
#include "operator/controller/node_inventory.h"
#include "operator/coordinator/coordinator_service.h"
#include "operator/kube/cache/decoded_objects.h"
#include "operator/kube/cache/informer.h"
#include "operator/kube/workqueue/work_queue.h"

namespace fulcrum::controller {

struct JobControllerOptions {
  std::string watch_namespace;  // empty: every namespace
  int workers = 2;
  std::vector<std::string> tolerated_taint_keys = {"nvidia.com/gpu"};
  ReconcilerOptions reconciler;
};

// What the metrics see of the controller itself.
struct ControllerObserver {
  std::function<void(double seconds, bool error)> reconciled;
  std::function<void(std::size_t depth, double waited_seconds)> dequeued;
};

class JobController {
 public:
  JobController(std::shared_ptr<kube::ApiClient> client,
                coordinator::CoordinatorService& coordinator, kube::EventRecorder* events,
                JobControllerOptions options, JobObserver job_observer = {},
                ControllerObserver observer = {});
  ~JobController();
  JobController(const JobController&) = delete;
  JobController& operator=(const JobController&) = delete;

  // Starts the informers (every replica).
  void Start();
  bool WaitForSync(std::chrono::milliseconds timeout) const;
  bool HasSynced() const;
  // Reconciles until `stop` is requested (the leader). Every known job is queued first, so a
  // new leader re-registers each job with its coordinator once the caches have synced. May be
  // called again after it returned (leadership lost and won back): each run has a fresh queue.
  void Run(std::stop_token stop);

  const NodeInventory& inventory() const { return inventory_; }
  // Jobs counted by status.phase ("Pending" for a job without one), from the cache.
  std::map<std::string, int> JobsByPhase() const;

 private:
  void Enqueue(const std::string& key);
  void EnqueueOwner(const kube::CachedObject& object);
  void EnqueueAll();
  void Work(kube::WorkQueue& queue);

  JobControllerOptions options_;
  ControllerObserver observer_;
  coordinator::CoordinatorService& coordinator_;
  NodeInventory inventory_;
  kube::Informer jobs_;
  kube::Informer pods_;
  kube::Informer secrets_;
  kube::Informer services_;
  kube::Informer network_policies_;
  kube::Informer nodes_;
  ApiJobWriter writer_;
  JobReconciler reconciler_;

  // The running leader's queue; null while not leading (informer events are then dropped:
  // the next run queues every job anyway).
  std::mutex queue_mutex_;
  std::shared_ptr<kube::WorkQueue> queue_;
  std::map<std::string, std::chrono::steady_clock::time_point> enqueued_at_;
  // Each job's phase, decoded once per version (JobsByPhase runs on every metrics scrape).
  mutable kube::DecodedObjects<std::string> phases_;
};

}  // namespace fulcrum::controller
