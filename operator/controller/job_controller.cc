#include "operator/controller/job_controller.h"

#include <thread>

#include "common/log.h"
#include "operator/controller/job_change.h"

namespace fulcrum::controller {
namespace {

constexpr const char* kLoopLogComponent = "controller";

kube::InformerOptions Watching(const std::string& ns, const std::string& label_selector = {}) {
  kube::InformerOptions options;
  options.ns = ns;
  options.reflector.label_selector = label_selector;
  return options;
}

std::string ManagedBySelector() {
  return std::string(kManagedByLabel) + "=" + kManagedByValue;
}

}  // namespace

JobController::JobController(std::shared_ptr<kube::ApiClient> client,
                             coordinator::CoordinatorService& coordinator,
                             kube::EventRecorder* events, JobControllerOptions options,
                             JobObserver job_observer, ControllerObserver observer)
    : options_(std::move(options)),
      observer_(std::move(observer)),
      coordinator_(coordinator),
      inventory_(options_.reconciler.keys, options_.tolerated_taint_keys),
      jobs_(client, HeteroTrainingJobs(), Watching(options_.watch_namespace)),
      // Only what the operator made: least privilege in what it caches, and small caches.
      pods_(client, kube::resources::Pods(), Watching("", ManagedBySelector())),
      secrets_(client, kube::resources::Secrets(),
               Watching(options_.watch_namespace, ManagedBySelector())),
      services_(client, kube::resources::Services(),
                Watching(options_.watch_namespace, ManagedBySelector())),
      network_policies_(client, kube::resources::NetworkPolicies(),
                        Watching(options_.watch_namespace, ManagedBySelector())),
      nodes_(client, kube::resources::Nodes(), Watching("")),
      writer_(client, events),
      reconciler_(writer_,
                  {&jobs_.store(), &pods_.store(), &secrets_.store(), &services_.store(),
                   &network_policies_.store()},
                  inventory_, coordinator, options_.reconciler, std::move(job_observer)) {
  // Pods of every namespace count against node capacity; the job's own are found by owner.
  (void)pods_.AddIndex(kube::indexes::kOwnerUid, kube::indexes::ByOwnerUid());
  jobs_.AddEventHandler({
      .on_add = [this](const kube::CachedObject& job) { Enqueue(job.key()); },
      // Not for a status-only update: that is the operator's own status write coming back.
      .on_update =
          [this](const kube::CachedObject& before, const kube::CachedObject& job) {
            if (ChangedBeyondStatus(before.ToJson(), job.ToJson())) Enqueue(job.key());
          },
      .on_delete = [this](const kube::CachedObject& job) { Enqueue(job.key()); },
  });
  const kube::ResourceEventHandler to_owner = {
      .on_add = [this](const kube::CachedObject& object) { EnqueueOwner(object); },
      .on_update = [this](const kube::CachedObject&,
                          const kube::CachedObject& object) { EnqueueOwner(object); },
      .on_delete = [this](const kube::CachedObject& object) { EnqueueOwner(object); },
  };
  pods_.AddEventHandler(to_owner);
  secrets_.AddEventHandler(to_owner);
  services_.AddEventHandler(to_owner);
  network_policies_.AddEventHandler(to_owner);
  // A node's change can free or take capacity, or lose a worker: every job looks again.
  FeedInventory(nodes_, inventory_, [this](const std::string&) { EnqueueAll(); });
  // A job's coordinator sent its trainers a generation, a plan or a control: reconcile it now
  // (its status changed) rather than on the next running resync. Coordinator job names are
  // the jobs' keys, NAMESPACE/NAME.
  coordinator.SetJobChangeObserver([this](std::string_view job) { Enqueue(std::string(job)); });
  coordinator.SetNodeProductLookup([this](const std::string& node) {
    const std::optional<GpuNode> known = inventory_.Get(node);
    return known ? known->product : std::string();
  });
}

JobController::~JobController() {
  coordinator_.SetJobChangeObserver({});
  std::shared_ptr<kube::WorkQueue> queue;
  {
    std::lock_guard lock(queue_mutex_);
    queue = queue_;
  }
  if (queue) queue->ShutDown();
  nodes_.Stop();
  network_policies_.Stop();
  services_.Stop();
  secrets_.Stop();
  pods_.Stop();
  jobs_.Stop();
}

void JobController::Start() {
  nodes_.Start();
  pods_.Start();
  secrets_.Start();
  services_.Start();
  network_policies_.Start();
  jobs_.Start();
}

bool JobController::HasSynced() const {
  return nodes_.HasSynced() && pods_.HasSynced() && secrets_.HasSynced() && services_.HasSynced() &&
         network_policies_.HasSynced() && jobs_.HasSynced();
}

bool JobController::WaitForSync(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const kube::Informer* informer :
       {&nodes_, &pods_, &secrets_, &services_, &network_policies_, &jobs_}) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !informer->WaitForSync(left)) return false;
  }
  return true;
}

void JobController::Enqueue(const std::string& key) {
  std::lock_guard lock(queue_mutex_);
  if (!queue_) return;
  enqueued_at_.try_emplace(key, std::chrono::steady_clock::now());
  queue_->Add(key);
}

void JobController::EnqueueOwner(const kube::CachedObject& object) {
  for (const auto& [key, value] : object.labels()) {
    if (key == kJobLabel) Enqueue(std::string(object.ns()) + "/" + value);
  }
}

void JobController::EnqueueAll() {
  for (const std::string& key : jobs_.store().Keys()) Enqueue(key);
}

void JobController::Run(std::stop_token stop) {
  if (!WaitForSync(std::chrono::minutes(5))) {
    log::Error(kLoopLogComponent, "", "caches did not sync in 5 minutes; not reconciling");
    return;
  }
  log::Info(kLoopLogComponent, "", "reconciling",
            {{"jobs", jobs_.store().size()}, {"workers", options_.workers}});
  auto queue = std::make_shared<kube::WorkQueue>();
  {
    std::lock_guard lock(queue_mutex_);
    queue_ = queue;
    enqueued_at_.clear();
  }
  EnqueueAll();
  std::vector<std::jthread> workers;
  for (int i = 0; i < options_.workers; ++i) workers.emplace_back([this, queue] { Work(*queue); });
  while (kube::SystemClock()->SleepFor(std::chrono::hours(1), stop)) {
  }  // until leading ends
  {
    std::lock_guard queue_lock(queue_mutex_);
    queue_.reset();
  }
  queue->ShutDownWithDrain();
}

void JobController::Work(kube::WorkQueue& queue) {
  while (std::optional<std::string> key = queue.Get()) {
    double waited = 0.0;
    {
      std::lock_guard lock(queue_mutex_);
      if (auto it = enqueued_at_.find(*key); it != enqueued_at_.end()) {
        waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second).count();
        enqueued_at_.erase(it);
      }
    }
    if (observer_.dequeued) observer_.dequeued(queue.Len(), waited);
    const auto started = std::chrono::steady_clock::now();
    Result<ReconcileResult> result = reconciler_.Reconcile(*key);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (observer_.reconciled) observer_.reconciled(seconds, !result.ok());
    if (!result.ok()) {
      log::Warn(kLoopLogComponent, *key, "reconcile failed; retrying with back-off",
                {{"error", result.error().ToString()}, {"retries", queue.NumRequeues(*key)}});
      queue.AddRateLimited(*key);
    } else {
      queue.Forget(*key);
      if (result->requeue_after) {
        queue.AddAfter(*key,
                       std::chrono::duration_cast<kube::Clock::Duration>(*result->requeue_after));
      }
    }
    queue.Done(*key);
  }
}

std::map<std::string, int> JobController::JobsByPhase() const {
  std::map<std::string, int> phases;
  const std::vector<std::string> each =
      phases_.Values(jobs_.store().List(), [](const nlohmann::json& job) {
        std::string phase = job.value("status", nlohmann::json::object()).value("phase", "");
        return phase.empty() ? std::string("Pending") : phase;
      });
  for (const std::string& phase : each) ++phases[phase];
  return phases;
}

}  // namespace fulcrum::controller
