#include "operator/controller/job_reconciler.h"

#include <absl/strings/escaping.h>
#include <openssl/rand.h>

#include <algorithm>

#include "common/log.h"
#include "common/rfc3339.h"
#include "operator/balancer/policy_kind.h"
#include "operator/controller/job_lifecycle.h"
#include "operator/controller/job_status.h"
#include "operator/controller/placement.h"

namespace fulcrum::controller {
namespace {

using std::chrono::milliseconds;
using SystemClock = std::chrono::system_clock;

constexpr const char* kReconcilerLogComponent = "controller";

JobPhase StoredPhase(const nlohmann::json& status) {
  return ParseJobPhase(status.is_object() ? status.value("phase", "") : "");
}

// 32 random bytes, hex: the per-job token trainers present to the coordinator. OpenSSL's CSPRNG,
// the one kept source of randomness for secrets.
Result<std::string> NewToken() {
  unsigned char bytes[32];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    return Error{ErrorCode::kInternal, "OpenSSL's RAND_bytes could not make a job token", "token"};
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof bytes));
}

bool Terminating(const nlohmann::json& object) {
  return object["metadata"].contains("deletionTimestamp");
}

WorkerPod ReadWorkerPod(const nlohmann::json& pod) {
  WorkerPod worker;
  worker.name = pod["metadata"].value("name", "");
  worker.uid = pod["metadata"].value("uid", "");
  const nlohmann::json labels = pod["metadata"].value("labels", nlohmann::json::object());
  try {
    worker.index = std::stoi(labels.value(kWorkerLabel, "-1"));
  } catch (...) {
    worker.index = -1;
  }
  const nlohmann::json status = pod.value("status", nlohmann::json::object());
  worker.phase = ParsePodPhase(status.value("phase", ""));
  worker.node = pod["spec"].value("nodeName", "");
  worker.terminating = Terminating(pod);
  worker.failure_reason = status.value("reason", "");
  for (const nlohmann::json& container :
       status.value("containerStatuses", nlohmann::json::array())) {
    const nlohmann::json terminated = container.value("state", nlohmann::json::object())
                                          .value("terminated", nlohmann::json::object());
    if (terminated.contains("reason")) {
      worker.failure_reason = terminated.value("reason", "") + " (exit code " +
                              std::to_string(terminated.value("exitCode", 0)) + ")";
      worker.exit_code = terminated.value("exitCode", 0);
      worker.termination_message = terminated.value("message", "");
    }
  }
  return worker;
}

Result<coordinator::JobSessionConfig> SessionConfig(const JobSpec& spec, const std::string& token) {
  coordinator::JobSessionConfig config;
  config.name = spec.CoordinatorJobName();
  config.token = token;
  config.global_batch = spec.global_batch;
  config.min_workers = spec.min_replicas;
  config.max_workers = spec.max_replicas;
  Result<balancer::PolicyKind> policy =
      balancer::ParsePolicyKind(spec.policy, "spec.balancing.policy");
  if (!policy.ok()) return policy.error();
  config.policy = *policy;
  config.interval_steps = spec.interval_steps;
  config.min_gain = spec.min_gain;
  config.seed = static_cast<uint64_t>(spec.seed);
  // Edited live: the coordinator passes them to every rank at the same step.
  config.learning_rate = spec.learning_rate;
  config.total_steps = spec.steps.value_or(0);
  config.batching.enabled = spec.batching.mode == "adaptive";
  config.batching.min_batch = spec.batching.min;
  config.batching.max_batch = spec.batching.max;
  config.batching.min_steps_between_changes = spec.batching.min_steps_between_changes;
  config.batching.max_factor = spec.batching.max_factor;
  config.batching.scaling = spec.batching.learning_rate_scaling == "sqrt"
                                ? balancer::LearningRateScaling::kSquareRoot
                                : balancer::LearningRateScaling::kAdaScale;
  return config;
}

// A deletion that lost a race (the pod is gone, or is another pod by now) is no error.
bool DeleteFailed(const Status& deleted) {
  return !deleted.ok() && deleted.error().code != ErrorCode::kNotFound &&
         deleted.error().code != ErrorCode::kConflict;
}

kube::DeleteOptions DeleteOptionsFor(const PodRemoval& removal) {
  kube::DeleteOptions options;
  options.precondition_uid = removal.uid;
  if (removal.force) options.grace_period_seconds = 0;
  return options;
}

}  // namespace

JobReconciler::JobReconciler(JobWriter& writer, ReconcilerCaches caches,
                             const NodeInventory& inventory, coordinator::JobRegistry& coordinator,
                             ReconcilerOptions options, JobObserver observer)
    : writer_(writer),
      caches_(caches),
      inventory_(inventory),
      coordinator_(coordinator),
      options_(std::move(options)),
      observer_(std::move(observer)),
      status_(writer, options_.status_min_interval),
      pod_gpu_usage_(options_.keys.resource) {}

Result<ReconcileResult> JobReconciler::Reconcile(const std::string& key) {
  const std::optional<kube::CachedObject> cached = caches_.jobs->Get(key);
  if (!cached) {
    // Gone (its finalizer already ran, or the operator missed the deletion): forget it.
    ForgetWorkerPods(key);
    if (coordinator_.HasJob(key)) (void)coordinator_.RemoveJob(key);
    const auto slash = key.find('/');
    if (observer_.removed && slash != std::string::npos) {
      observer_.removed(key.substr(0, slash), key.substr(slash + 1));
    }
    return ReconcileResult{};
  }
  const nlohmann::json job = cached->ToJson();
  Result<JobSpec> spec = ParseJobSpec(job);
  if (Terminating(job)) {
    if (coordinator_.HasJob(key)) (void)coordinator_.RemoveJob(key);
    if (spec.ok()) {
      if (Status status = Delete(job, *spec); !status.ok()) return status.error();
    }
    return ReconcileResult{};
  }
  if (!spec.ok()) return ReconcileInvalid(job, spec.error());
  if (Status status = EnsureFinalizer(job); !status.ok()) return status.error();
  const nlohmann::json status = status_.Current(job);
  if (Finished(StoredPhase(status))) return Finish(job, *spec, status);
  return ReconcileLive(job, *spec);
}

Result<ReconcileResult> JobReconciler::ReconcileInvalid(const nlohmann::json& job,
                                                        const Error& invalid) {
  // The CRD admits only specs the operator can run; this one came from elsewhere.
  const nlohmann::json status = status_.Current(job);
  if (StoredPhase(status) == JobPhase::kFailed) return ReconcileResult{};
  JobState state;
  state.observed_generation = job["metadata"].value("generation", int64_t{0});
  state.failed_reason = "InvalidSpec";
  state.failed_message = invalid.ToString() + ": fix the spec and re-create the job";
  state.completion_time = FormatRfc3339(SystemClock::now());
  writer_.Event(job, InvalidSpecEvent(state.failed_message));
  auto written =
      status_.Write(job, BuildJobStatus(state, {}, status, FormatRfc3339(SystemClock::now())));
  if (!written.ok()) return written.error();
  return ReconcileResult{};
}

Status JobReconciler::EnsureFinalizer(const nlohmann::json& job) {
  nlohmann::json finalizers = job["metadata"].value("finalizers", nlohmann::json::array());
  if (std::find(finalizers.begin(), finalizers.end(), kFinalizer) != finalizers.end()) return Ok();
  finalizers.push_back(kFinalizer);
  // The resourceVersion makes the merge patch conditional: a list is replaced whole, so a
  // finalizer someone else added meanwhile must not be lost.
  const nlohmann::json patch = {
      {"metadata",
       {{"finalizers", finalizers}, {"resourceVersion", job["metadata"]["resourceVersion"]}}}};
  auto patched = writer_.Patch(HeteroTrainingJobs(), job["metadata"].value("namespace", ""),
                               job["metadata"].value("name", ""), patch);
  return patched.ok() ? Ok() : Status(patched.error());
}

std::shared_ptr<kube::DecodedObjects<WorkerPod>> JobReconciler::WorkerPodsOf(
    const std::string& key) {
  std::lock_guard lock(worker_pods_mutex_);
  auto& entry = worker_pods_[key];
  if (!entry) entry = std::make_shared<kube::DecodedObjects<WorkerPod>>();
  return entry;
}

void JobReconciler::ForgetWorkerPods(const std::string& key) {
  std::lock_guard lock(worker_pods_mutex_);
  worker_pods_.erase(key);
}

Status JobReconciler::Delete(const nlohmann::json& job, const JobSpec& spec) {
  if (observer_.removed) observer_.removed(spec.ns, spec.name);
  ForgetWorkerPods(spec.CoordinatorJobName());
  status_.Forget(spec.uid);
  nlohmann::json finalizers = job["metadata"].value("finalizers", nlohmann::json::array());
  const auto ours = std::find(finalizers.begin(), finalizers.end(), kFinalizer);
  if (ours == finalizers.end()) return Ok();
  finalizers.erase(ours);
  log::Info(kReconcilerLogComponent, spec.CoordinatorJobName(),
            "job deleted: removed from the coordinator");
  const nlohmann::json patch = {
      {"metadata",
       {{"finalizers", finalizers}, {"resourceVersion", job["metadata"]["resourceVersion"]}}}};
  auto patched = writer_.Patch(HeteroTrainingJobs(), spec.ns, spec.name, patch);
  if (!patched.ok() && patched.error().code != ErrorCode::kNotFound) return patched.error();
  return Ok();
}

Result<std::string> JobReconciler::EnsureToken(const JobSpec& spec) {
  const std::string name = TokenSecretName(spec);
  std::optional<nlohmann::json> secret;
  if (auto cached = caches_.secrets->Get(spec.ns + "/" + name)) secret = cached->ToJson();
  if (!secret) {
    Result<std::string> token = NewToken();
    if (!token.ok()) return token.error();
    auto created = writer_.Create(kube::resources::Secrets(), spec.ns,
                                  TokenSecret(spec, *token, options_.coordinator_ca));
    if (created.ok()) {
      secret = *created;
    } else if (created.error().code == ErrorCode::kAlreadyExists) {
      auto fetched = writer_.Get(kube::resources::Secrets(), spec.ns, name);  // cache lags
      if (!fetched.ok()) return fetched.error();
      secret = *fetched;
    } else {
      return created.error();
    }
  }
  const std::string encoded = (*secret)["data"].value("token", "");
  std::string token;
  if (encoded.empty() || !absl::Base64Unescape(encoded, &token) || token.empty()) {
    return Error{ErrorCode::kFailedPrecondition,
                 "Secret " + spec.ns + "/" + name +
                     " has no data.token: delete it and the operator makes a new one",
                 "token"};
  }
  return token;
}

Status JobReconciler::EnsureCreated(const kube::Store& cache, const kube::ResourceType& type,
                                    const JobSpec& spec, const std::string& name,
                                    const std::function<nlohmann::json()>& make) {
  if (cache.Get(spec.ns + "/" + name)) return Ok();
  auto created = writer_.Create(type, spec.ns, make());
  if (!created.ok() && created.error().code != ErrorCode::kAlreadyExists) return created.error();
  return Ok();
}

std::map<std::string, std::string> JobReconciler::ProductsOf(
    const std::vector<WorkerPod>& pods) const {
  std::map<std::string, std::string> products;
  for (const WorkerPod& pod : pods) {
    if (pod.node.empty() || products.contains(pod.node)) continue;
    if (const std::optional<GpuNode> node = inventory_.Get(pod.node)) {
      products[pod.node] = node->product;
    }
  }
  return products;
}

JobSpec JobReconciler::Placement(const JobSpec& spec, const std::vector<WorkerPod>& pods,
                                 std::map<std::string, int>* unsupported) const {
  JobSpec placement = PlacementSpec(spec, pods, ProductsOf(pods));
  // CPU jobs, and emulated GPUs, run the CPU image anywhere.
  if (spec.gpus_per_worker == 0 || options_.emulated_gpus) return placement;
  std::vector<GpuNode> admitted;
  for (const GpuNode& node : inventory_.Nodes()) {
    if (spec.gpu_selector.Admits(node.product)) admitted.push_back(node);
  }
  const std::map<std::string, int> below =
      UnsupportedProducts(admitted, options_.min_compute_capability);
  if (unsupported != nullptr) *unsupported = below;
  return WithoutUnsupported(std::move(placement), below);
}

int JobReconciler::CountFreeSlots(const JobSpec& spec, const LiveWorld& world) const {
  const std::vector<WorkerPod>& pods = world.workers.pods;
  const std::map<std::string, std::string> products = ProductsOf(pods);
  const JobSpec placement = Placement(spec, pods);
  std::set<std::string> released_nodes;
  for (const ReleasedWorker& worker : ReadReleasedWorkers(world.previous)) {
    released_nodes.insert(worker.node);
  }
  return FreeSlots(placement, pods, released_nodes,
                   inventory_.Candidates(placement.gpus_per_worker, placement.gpu_selector),
                   pod_gpu_usage_.UsedGpus(caches_.pods->List()), products);
}

Result<coordinator::JobSessionSnapshot> JobReconciler::EnsureRegistered(const JobSpec& spec) {
  Result<std::string> token = EnsureToken(spec);
  if (!token.ok()) return token.error();
  if (Status status = EnsureCreated(*caches_.services, kube::resources::Services(), spec,
                                    ServiceName(spec), [&] { return HeadlessService(spec); });
      !status.ok()) {
    return status.error();
  }
  // Before the first pod: rank 0's TCPStore is never open to pods of other jobs.
  if (Status status =
          EnsureCreated(*caches_.network_policies, kube::resources::NetworkPolicies(), spec,
                        NetworkPolicyName(spec), [&] { return TrainerNetworkPolicy(spec); });
      !status.ok()) {
    return status.error();
  }
  Result<coordinator::JobSessionConfig> session = SessionConfig(spec, *token);
  if (!session.ok()) return session.error();
  // Before any pod starts; again after an operator restart; and on every edit (applied live).
  if (Status status = coordinator_.AddJob(*session); !status.ok()) return status.error();
  return coordinator_.SnapshotOf(spec.CoordinatorJobName())
      .value_or(coordinator::JobSessionSnapshot{});
}

Result<LiveWorld> JobReconciler::Observe(const nlohmann::json& job, const JobSpec& spec,
                                         coordinator::JobSessionSnapshot training) {
  LiveWorld world;
  world.training = std::move(training);
  world.previous = status_.Current(job);
  auto own_pods = caches_.pods->ByIndex(kube::indexes::kOwnerUid, spec.uid);
  if (!own_pods.ok()) return own_pods.error();
  WorkerWorld& workers = world.workers;
  workers.now = SystemClock::now();
  workers.failures = ReadWorkerFailures(world.previous);
  workers.was_suspended = StoredPhase(world.previous) == JobPhase::kSuspended;
  for (WorkerPod& pod : WorkerPodsOf(spec.CoordinatorJobName())->Values(*own_pods, ReadWorkerPod)) {
    if (!pod.node.empty() && !workers.nodes.contains(pod.node)) {
      const std::optional<GpuNode> node = inventory_.Get(pod.node);
      workers.nodes[pod.node] =
          !node ? NodeHealth::kGone : (node->ready ? NodeHealth::kReady : NodeHealth::kNotReady);
    }
    workers.pods.push_back(std::move(pod));
  }
  for (const coordinator::MemberSnapshot& member : world.training.members) {
    if (member.connected) workers.connected.insert(member.pod);
    if (member.releasable && !spec.suspend) workers.releasable.insert(member.pod);
  }
  return world;
}

Result<ReconcileResult> JobReconciler::ReconcileLive(const nlohmann::json& job,
                                                     const JobSpec& spec) {
  Result<coordinator::JobSessionSnapshot> training = EnsureRegistered(spec);
  if (!training.ok()) return training.error();
  Result<LiveWorld> world = Observe(job, spec, std::move(*training));
  if (!world.ok()) return world.error();

  LiveDecision decision = DecideLive(spec, *world, options_.stop_grace);
  if (decision.workers.could_grow) {
    // Free slots matter only to a job that could grow. Counting them is a pass over every
    // trainer pod and GPU node of the cluster (a fifth of a reconcile at 50 jobs on 125 nodes),
    // so a full job, as most running jobs are, is decided without them.
    world->workers.free_slots = CountFreeSlots(spec, *world);
    decision = DecideLive(spec, *world, options_.stop_grace);
  }

  if (Status acted = ActOnPods(job, spec, *world, decision); !acted.ok()) return acted.error();
  for (const EventNote& event : decision.status_events) writer_.Event(job, event);
  auto next_write = status_.Write(job, decision.status);
  if (!next_write.ok()) return next_write.error();
  if (observer_.updated) {
    observer_.updated(spec.ns, spec.name, decision.phase, world->training, decision.failures);
  }

  ReconcileResult result;
  const auto sooner = [&](milliseconds delay) {
    result.requeue_after = result.requeue_after ? std::min(*result.requeue_after, delay) : delay;
  };
  if (decision.workers.retry_after) sooner(*decision.workers.retry_after);
  if (*next_write) sooner(**next_write);
  if (!Finished(decision.phase)) sooner(options_.running_resync);
  return result;
}

Status JobReconciler::ActOnPods(const nlohmann::json& job, const JobSpec& spec,
                                const LiveWorld& world, const LiveDecision& decision) {
  if (decision.record_failures) {
    auto written = status_.Write(job, *decision.record_failures);
    if (!written.ok()) return written.error();
  }
  for (const PodDeletion& deletion : decision.deletions) {
    Status deleted = writer_.Delete(kube::resources::Pods(), spec.ns, deletion.removal.pod,
                                    DeleteOptionsFor(deletion.removal));
    if (DeleteFailed(deleted)) return deleted.error();
    if (deletion.event) writer_.Event(job, *deletion.event);
  }
  if (decision.stop_trainers) {
    // Trainers checkpoint after the current step and exit 0; their pods are removed then.
    (void)coordinator_.SendControl(spec.CoordinatorJobName(), fulcrum::v1::Control::STOP,
                                   "suspended: spec.suspend is true");
  }
  for (const PodDeletion& late : decision.stop_timed_out) {
    (void)writer_.Delete(kube::resources::Pods(), spec.ns, late.removal.pod,
                         DeleteOptionsFor(late.removal));
    if (late.event) writer_.Event(job, *late.event);
  }
  if (decision.workers.create.empty()) return Ok();
  return CreateWorkers(job, spec, world, decision);
}

Status JobReconciler::CreateWorkers(const nlohmann::json& job, const JobSpec& spec,
                                    const LiveWorld& world, const LiveDecision& decision) {
  std::map<std::string, int> unsupported;
  const JobSpec placement = Placement(spec, world.workers.pods, &unsupported);
  if (!unsupported.empty()) {
    writer_.Event(job, UnsupportedGpusEvent(unsupported, options_.default_cuda_image,
                                            options_.min_compute_capability));
  }
  TrainerPodOptions options;
  options.default_image = options_.default_image;
  options.default_cuda_image = options_.default_cuda_image;
  options.emulated_gpus = options_.emulated_gpus;
  options.coordinator_address = options_.coordinator_address;
  options.coordinator_tls = !options_.coordinator_ca.empty();
  options.keys = options_.keys;
  options.product_speeds =
      ProductSpeeds(inventory_.Candidates(placement.gpus_per_worker, placement.gpu_selector));
  // Released workers' nodes, those released by this very decision included.
  for (const ReleasedWorker& worker : ReadReleasedWorkers(decision.status)) {
    options.excluded_nodes.push_back(worker.node);
  }
  // One Event names every pod this reconcile made: a job of 8 workers starts with 1 Event
  // write instead of 8 (an Event and 7 series patches), which at 200 jobs is 1,400 requests.
  std::vector<std::string> created;
  const auto record_created = [&] {
    if (!created.empty()) writer_.Event(job, CreatedWorkersEvent(created));
  };
  for (int index : decision.workers.create) {
    auto pod =
        writer_.Create(kube::resources::Pods(), spec.ns, TrainerPod(placement, index, options));
    if (!pod.ok() && pod.error().code != ErrorCode::kAlreadyExists) {
      record_created();
      writer_.Event(job, FailedCreateEvent(WorkerPodName(spec, index), pod.error().ToString()));
      return pod.error();
    }
    if (pod.ok()) created.push_back(WorkerPodName(spec, index));
  }
  record_created();
  return Ok();
}

Result<ReconcileResult> JobReconciler::Finish(const nlohmann::json& job, const JobSpec& spec,
                                              const nlohmann::json& status) {
  const std::string job_name = spec.CoordinatorJobName();
  ForgetWorkerPods(job_name);
  if (coordinator_.HasJob(job_name)) {
    (void)coordinator_.RemoveJob(job_name);
    log::Info(kReconcilerLogComponent, job_name, "job finished: removed from the coordinator",
              {{"phase", std::string(ToString(StoredPhase(status)))}});
  }
  const TtlDecision ttl = DecideTtl(spec, status.value("completionTime", ""), SystemClock::now());
  if (!ttl.delete_now) return ReconcileResult{ttl.check_after};
  writer_.Event(job, ExpiredEvent(*spec.ttl_seconds_after_finished));
  kube::DeleteOptions options;
  options.propagation = kube::PropagationPolicy::kBackground;
  options.precondition_uid = spec.uid;
  Status deleted = writer_.Delete(HeteroTrainingJobs(), spec.ns, spec.name, options);
  if (!deleted.ok() && deleted.error().code != ErrorCode::kNotFound) return deleted.error();
  log::Info(kReconcilerLogComponent, job_name, "deleted after spec.ttlSecondsAfterFinished",
            {{"ttl_seconds", *spec.ttl_seconds_after_finished}});
  return ReconcileResult{};
}

}  // namespace fulcrum::controller
