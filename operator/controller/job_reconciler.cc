#include "operator/controller/job_reconciler.h"

#include <absl/strings/escaping.h>
#include <absl/strings/str_join.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/log.h"
#include "operator/balancer/policy_kind.h"
#include "operator/controller/job_status.h"
#include "operator/controller/worker_plan.h"

namespace fulcrum::controller {
namespace {

using std::chrono::milliseconds;
using SystemClock = std::chrono::system_clock;

constexpr const char* kComponent = "controller";

std::string StatusPhase(const nlohmann::json& status) {
  return status.is_object() ? status.value("phase", "") : "";
}

// 32 random bytes, hex: the per-job token trainers present to the coordinator.
std::string NewToken() {
  std::random_device device;  // /dev/urandom on Linux
  std::string token;
  for (int i = 0; i < 8; ++i) {
    char chunk[9];
    std::snprintf(chunk, sizeof chunk, "%08x", static_cast<unsigned>(device()));
    token += chunk;
  }
  return token;
}

int64_t VersionNumber(const nlohmann::json& object) {
  const std::string version = object["metadata"].value("resourceVersion", "0");
  try {
    return std::stoll(version);
  } catch (...) {
    return 0;  // opaque versions: the cache is taken as current
  }
}

bool Terminating(const nlohmann::json& object) {
  return object["metadata"].contains("deletionTimestamp");
}

// Holds or will hold its node's GPUs: not being deleted, not ended.
bool Active(const WorkerPod& pod) {
  return !pod.terminating && pod.phase != "Succeeded" && pod.phase != "Failed";
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
  worker.phase = status.value("phase", "Pending");
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
  return config;
}

// When the stored status's Suspended condition turned True ("" if it is not True).
std::string SuspendedSince(const nlohmann::json& status) {
  if (!status.is_object()) return "";
  for (const nlohmann::json& condition : status.value("conditions", nlohmann::json::array())) {
    if (condition.value("type", "") == "Suspended" && condition.value("status", "") == "True") {
      return condition.value("lastTransitionTime", "");
    }
  }
  return "";
}

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * fraction);
  return text;
}

}  // namespace

kube::ResourceType HeteroTrainingJobs() {
  return {"fulcrum.dev", "v1alpha1", "heterotrainingjobs", true};
}

JobReconciler::JobReconciler(std::shared_ptr<kube::ApiClient> client, ReconcilerCaches caches,
                             const NodeInventory& inventory,
                             coordinator::CoordinatorService& coordinator,
                             kube::EventRecorder* events, ReconcilerOptions options,
                             JobObserver observer)
    : client_(std::move(client)),
      caches_(caches),
      inventory_(inventory),
      coordinator_(coordinator),
      events_(events),
      options_(std::move(options)),
      observer_(std::move(observer)),
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
  if (!spec.ok()) {
    // The CRD admits only specs the operator can run; this one came from elsewhere.
    nlohmann::json status = CurrentStatus(job);
    if (StatusPhase(status) == "Failed") return ReconcileResult{};
    JobState state;
    state.observed_generation = job["metadata"].value("generation", int64_t{0});
    state.failed_reason = "InvalidSpec";
    state.failed_message = spec.error().ToString() + ": fix the spec and re-create the job";
    state.completion_time = Rfc3339(SystemClock::now());
    Event(job, true, "InvalidSpec", "Validate", state.failed_message);
    const nlohmann::json failed = BuildJobStatus(state, {}, status, Rfc3339(SystemClock::now()));
    auto written = WriteStatus(job, failed);
    if (!written.ok()) return written.error();
    return ReconcileResult{};
  }
  if (Status status = EnsureFinalizer(job); !status.ok()) return status.error();
  const nlohmann::json status = CurrentStatus(job);
  const std::string phase = StatusPhase(status);
  if (phase == "Succeeded" || phase == "Failed") return Finish(job, *spec, status);
  return ReconcileLive(job, *spec);
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
  auto patched = client_->Patch(HeteroTrainingJobs(), job["metadata"].value("namespace", ""),
                                job["metadata"].value("name", ""), kube::PatchType::kMerge, patch);
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
  {
    std::lock_guard lock(written_mutex_);
    written_.erase(spec.uid);
  }
  nlohmann::json finalizers = job["metadata"].value("finalizers", nlohmann::json::array());
  const auto ours = std::find(finalizers.begin(), finalizers.end(), kFinalizer);
  if (ours == finalizers.end()) return Ok();
  finalizers.erase(ours);
  log::Info(kComponent, spec.CoordinatorJobName(), "job deleted: removed from the coordinator");
  const nlohmann::json patch = {
      {"metadata",
       {{"finalizers", finalizers}, {"resourceVersion", job["metadata"]["resourceVersion"]}}}};
  auto patched =
      client_->Patch(HeteroTrainingJobs(), spec.ns, spec.name, kube::PatchType::kMerge, patch);
  if (!patched.ok() && patched.error().code != ErrorCode::kNotFound) return patched.error();
  return Ok();
}

Result<std::string> JobReconciler::EnsureToken(const JobSpec& spec) {
  const std::string name = TokenSecretName(spec);
  std::optional<nlohmann::json> secret;
  if (auto cached = caches_.secrets->Get(spec.ns + "/" + name)) secret = cached->ToJson();
  if (!secret) {
    auto created = client_->Create(kube::resources::Secrets(), spec.ns,
                                   TokenSecret(spec, NewToken(), options_.coordinator_ca));
    if (created.ok()) {
      secret = *created;
    } else if (created.error().code == ErrorCode::kAlreadyExists) {
      auto fetched = client_->Get(kube::resources::Secrets(), spec.ns, name);  // cache lags
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
  auto created = client_->Create(type, spec.ns, make());
  if (!created.ok() && created.error().code != ErrorCode::kAlreadyExists) return created.error();
  return Ok();
}

int JobReconciler::FreeSlots(const JobSpec& spec, const std::vector<WorkerPod>& own_pods,
                             const std::set<std::string>& excluded) const {
  std::map<std::string, int> used_gpus = pod_gpu_usage_.UsedGpus(caches_.pods->List());
  std::map<std::string, int> own_on_node;
  int waiting = 0;
  for (const WorkerPod& pod : own_pods) {
    if (!Active(pod)) continue;
    if (pod.node.empty()) {
      ++waiting;
    } else {
      ++own_on_node[pod.node];
    }
  }
  // gpuSelector.maxWorkersPerProduct: what is left of each cap after the job's placed workers.
  std::map<std::string, int> cap_left = spec.max_workers_per_product;
  for (const auto& [node, count] : own_on_node) {
    const std::optional<GpuNode> known = inventory_.Get(node);
    if (known && cap_left.contains(known->product)) cap_left[known->product] -= count;
  }
  int free = 0;
  for (const GpuNode& node : inventory_.Candidates(spec.gpus_per_worker, spec.gpu_selector)) {
    if (excluded.contains(node.name)) continue;
    int slots = 0;
    if (spec.gpus_per_worker > 0) {
      slots = std::max(0, (node.allocatable_gpus - used_gpus[node.name]) / spec.gpus_per_worker);
    } else if (own_on_node[node.name] == 0) {
      slots = 1;  // CPU workers: one per node, so a CPU job spreads out
    }
    if (const auto cap = cap_left.find(node.product); cap != cap_left.end()) {
      slots = std::clamp(cap->second, 0, slots);
      cap->second -= slots;
    }
    free += slots;
  }
  return free - waiting;
}

JobSpec JobReconciler::PlacementSpec(const JobSpec& spec,
                                     const std::vector<WorkerPod>& own_pods) const {
  if (spec.max_workers_per_product.empty()) return spec;
  std::map<std::string, int> placed;
  for (const WorkerPod& pod : own_pods) {
    if (!Active(pod)) continue;
    if (const std::optional<GpuNode> node = inventory_.Get(pod.node)) ++placed[node->product];
  }
  JobSpec placement = spec;
  for (const auto& [product, cap] : spec.max_workers_per_product) {
    // A product at its cap takes no new worker: new pods are not allowed there at all.
    if (placed[product] >= cap) placement.gpu_selector.denied.push_back(product);
  }
  return placement;
}

TrainerPodOptions JobReconciler::PodOptions(const JobSpec& spec) const {
  TrainerPodOptions pod;
  pod.default_image = options_.default_image;
  pod.coordinator_address = options_.coordinator_address;
  pod.coordinator_tls = !options_.coordinator_ca.empty();
  pod.keys = options_.keys;
  for (const GpuNode& node : inventory_.Candidates(spec.gpus_per_worker, spec.gpu_selector)) {
    if (!node.prior_speed || node.product.empty()) continue;
    const bool seen = std::any_of(pod.product_speeds.begin(), pod.product_speeds.end(),
                                  [&](const auto& known) { return known.first == node.product; });
    if (!seen) pod.product_speeds.emplace_back(node.product, *node.prior_speed);
  }
  return pod;
}

Result<ReconcileResult> JobReconciler::ReconcileLive(const nlohmann::json& job,
                                                     const JobSpec& spec) {
  const auto now = SystemClock::now();
  const std::string job_name = spec.CoordinatorJobName();
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
  const coordinator::JobSessionSnapshot training =
      coordinator_.SnapshotOf(job_name).value_or(coordinator::JobSessionSnapshot{});

  const nlohmann::json previous = CurrentStatus(job);
  const std::string previous_phase = StatusPhase(previous);
  auto own_pods = caches_.pods->ByIndex(kube::indexes::kOwnerUid, spec.uid);
  if (!own_pods.ok()) return own_pods.error();
  WorkerWorld world;
  world.now = now;
  world.failures = ReadWorkerFailures(previous);
  world.was_suspended = previous_phase == "Suspended";
  for (WorkerPod& pod : WorkerPodsOf(spec.CoordinatorJobName())->Values(*own_pods, ReadWorkerPod)) {
    if (!pod.node.empty() && !world.nodes.contains(pod.node)) {
      const std::optional<GpuNode> node = inventory_.Get(pod.node);
      world.nodes[pod.node] =
          !node ? NodeHealth::kGone : (node->ready ? NodeHealth::kReady : NodeHealth::kNotReady);
    }
    world.pods.push_back(std::move(pod));
  }
  const JobSpec placement = PlacementSpec(spec, world.pods);
  std::vector<ReleasedWorker> released = ReadReleasedWorkers(previous);
  std::set<std::string> released_nodes;
  for (const ReleasedWorker& worker : released) released_nodes.insert(worker.node);
  if (!spec.suspend) {
    for (const coordinator::MemberSnapshot& member : training.members) {
      if (member.releasable) world.releasable.insert(member.pod);
    }
  }

  JobState state;
  state.observed_generation = spec.generation;
  state.min_workers = spec.min_replicas;
  state.output_path = spec.output_path;
  state.suspended = spec.suspend;
  state.failures = world.failures;
  state.released = released;
  state.start_time = previous.is_object() ? previous.value("startTime", "") : "";
  const std::optional<SystemClock::time_point> started = ParseRfc3339(state.start_time);
  WorkerDecisions decisions;
  if (spec.active_deadline_seconds && started &&
      now - *started >= std::chrono::seconds(*spec.active_deadline_seconds)) {
    decisions.failed_reason = "DeadlineExceeded";
    decisions.failed_message = "the job ran longer than spec.activeDeadlineSeconds (" +
                               std::to_string(*spec.active_deadline_seconds) + " s)";
    for (const WorkerPod& pod : world.pods) {
      if (!pod.terminating)
        decisions.remove.push_back({pod.name, pod.uid, RemovalReason::kFinished});
    }
  } else {
    // Free slots matter only to a job that could grow. Counting them is a pass over every
    // trainer pod and GPU node of the cluster (a fifth of a reconcile at 50 jobs on 125 nodes,
    // growing with jobs x pods), so a full job, as most running jobs are, is decided without
    // them; DecideWorkers, pure and cheap, runs again with them for one that could grow.
    decisions = DecideWorkers(spec, world);
    if (decisions.could_grow) {
      world.free_slots = FreeSlots(placement, world.pods, released_nodes);
      decisions = DecideWorkers(spec, world);
    }
  }
  state.failures.insert(state.failures.end(), decisions.new_failures.begin(),
                        decisions.new_failures.end());
  state.succeeded = decisions.succeeded;
  state.failed_reason = decisions.failed_reason;
  state.failed_message = decisions.failed_message;
  if (state.succeeded || state.failed_reason) state.completion_time = Rfc3339(now);
  if (state.start_time.empty() && !decisions.create.empty()) state.start_time = Rfc3339(now);
  state.created = !world.pods.empty() || !decisions.create.empty();
  state.rebalancing = training.last_rebalance.apply_at_step > training.step + 1;

  if (!decisions.new_failures.empty()) {
    // Record failures before the pods that show them are deleted, so each counts once even
    // if this reconcile stops half-way.
    nlohmann::json recorded = previous.is_object() ? previous : nlohmann::json::object();
    recorded["workerFailures"] =
        BuildJobStatus(state, training, previous, Rfc3339(now))["workerFailures"];
    auto written = WriteStatus(job, recorded);
    if (!written.ok()) return written.error();
  }

  for (const PodRemoval& removal : decisions.remove) {
    kube::DeleteOptions options;
    options.precondition_uid = removal.uid;
    if (removal.force) options.grace_period_seconds = 0;
    Status deleted = client_->Delete(kube::resources::Pods(), spec.ns, removal.pod, options);
    if (!deleted.ok() && deleted.error().code != ErrorCode::kNotFound &&
        deleted.error().code != ErrorCode::kConflict) {
      return deleted.error();
    }
    switch (removal.reason) {
      case RemovalReason::kFailed:
        Event(job, true, "WorkerFailed", "Replace",
              "worker pod " + removal.pod + " failed; replacing it after back-off (" +
                  std::to_string(state.failures.size()) + " of at most " +
                  std::to_string(spec.backoff_limit) + " failures)");
        break;
      case RemovalReason::kNodeLost:
        Event(job, true, "WorkerLost", "Remove",
              "worker pod " + removal.pod +
                  " removed: its node is gone or NotReady; the others go on in a new "
                  "membership generation");
        break;
      case RemovalReason::kScaledDown:
        Event(job, false, "ScaledDown", "Drain",
              "worker pod " + removal.pod + " drained: spec.replicas.max is " +
                  std::to_string(spec.max_replicas) + "; the others keep running");
        break;
      case RemovalReason::kReleased: {
        const auto member = std::find_if(
            training.members.begin(), training.members.end(),
            [&](const coordinator::MemberSnapshot& m) { return m.pod == removal.pod; });
        const std::string node = member != training.members.end() ? member->node : "";
        const std::string product = member != training.members.end() ? member->gpu_product : "";
        state.released.push_back({removal.pod, node, product, training.release_gain, Rfc3339(now)});
        Event(job, false, "WorkerReleased", "Release",
              "worker pod " + removal.pod + " on " + node + " (" + product +
                  ") released: the best split gives it nothing, its GPU cannot make the job "
                  "faster (going on without it saves a predicted " +
                  Percent(training.release_gain) +
                  " of step time); the job takes no new worker "
                  "on that node");
        break;
      }
      case RemovalReason::kFinished:
        break;
    }
  }

  if (spec.suspend && !state.failed_reason) {
    const bool running = std::any_of(
        world.pods.begin(), world.pods.end(),
        [](const WorkerPod& pod) { return !pod.terminating && pod.phase == "Running"; });
    if (running) {
      // Trainers checkpoint after the current step and exit 0; their pods are removed then.
      (void)coordinator_.SendControl(job_name, fulcrum::v1::Control::STOP,
                                     "suspended: spec.suspend is true");
      const auto since = ParseRfc3339(SuspendedSince(previous));
      if (since && now - *since > options_.stop_grace) {
        for (const WorkerPod& pod : world.pods) {
          if (pod.terminating || pod.phase != "Running") continue;
          kube::DeleteOptions options;
          options.precondition_uid = pod.uid;
          (void)client_->Delete(kube::resources::Pods(), spec.ns, pod.name, options);
          Event(job, true, "StopTimedOut", "Suspend",
                "worker pod " + pod.name + " did not stop after its checkpoint within " +
                    std::to_string(options_.stop_grace.count() / 1000) + " s; deleted");
        }
      }
    }
  }

  if (!decisions.create.empty() && !state.failed_reason && !state.succeeded) {
    TrainerPodOptions pod_options = PodOptions(placement);
    for (const ReleasedWorker& worker : state.released)
      pod_options.excluded_nodes.push_back(worker.node);
    // One Event names every pod this reconcile made: a job of 8 workers starts with 1 Event
    // write instead of 8 (an Event and 7 series patches), which at 200 jobs is 1,400 requests.
    std::vector<std::string> created_pods;
    const auto record_created = [&] {
      if (created_pods.empty()) return;
      Event(job, false, "CreatedWorker", "Create",
            (created_pods.size() == 1 ? "created worker pod " : "created worker pods ") +
                absl::StrJoin(created_pods, ", "));
    };
    for (int index : decisions.create) {
      auto created = client_->Create(kube::resources::Pods(), spec.ns,
                                     TrainerPod(placement, index, pod_options));
      if (!created.ok() && created.error().code != ErrorCode::kAlreadyExists) {
        record_created();
        Event(job, true, "FailedCreate", "Create",
              "cannot create worker pod " + WorkerPodName(spec, index) + ": " +
                  created.error().ToString());
        return created.error();
      }
      if (created.ok()) created_pods.push_back(WorkerPodName(spec, index));
    }
    record_created();
  }

  const nlohmann::json status = BuildJobStatus(state, training, previous, Rfc3339(now));
  const std::string new_phase = StatusPhase(status);
  if (new_phase != previous_phase) {
    if (new_phase == "Running" && previous_phase != "Rebalancing") {
      Event(job, false, "Started", "Train",
            std::to_string(status.value("readyWorkers", 0)) + " workers training");
    } else if (new_phase == "Suspended") {
      Event(job, false, "Suspended", "Suspend",
            "spec.suspend is true: trainers checkpoint and their pods are deleted");
    } else if (new_phase == "Succeeded") {
      Event(job, false, "Succeeded", "Complete",
            "trained " + std::to_string(status.value("step", int64_t{0})) + " steps");
    } else if (new_phase == "Failed") {
      Event(job, true, *state.failed_reason, "Fail", state.failed_message);
    }
  }
  if (ConditionIsTrue(status, "DataBound") && !ConditionIsTrue(previous, "DataBound")) {
    for (const nlohmann::json& condition : status["conditions"]) {
      if (condition.value("type", "") == "DataBound")
        Event(job, true, "DataBound", "Train", condition.value("message", ""));
    }
  }
  if (status.contains("lastRebalance") &&
      (!previous.is_object() || !previous.contains("lastRebalance") ||
       previous["lastRebalance"] != status["lastRebalance"]) &&
      training.last_rebalance.apply_at_step >= 0) {
    std::string note = "step " + std::to_string(training.last_rebalance.apply_at_step) + ": " +
                       training.last_rebalance.reason;
    if (training.last_rebalance.predicted_gain > 0) {
      note += " (predicted gain " + Percent(training.last_rebalance.predicted_gain) + ")";
    }
    Event(job, false, "Rebalanced", "Rebalance", note);
  }
  auto next_write = WriteStatus(job, status);
  if (!next_write.ok()) return next_write.error();
  if (observer_.updated)
    observer_.updated(spec.ns, spec.name, new_phase, training, state.failures.size());

  ReconcileResult result;
  const auto sooner = [&](milliseconds delay) {
    result.requeue_after = result.requeue_after ? std::min(*result.requeue_after, delay) : delay;
  };
  if (decisions.retry_after) sooner(*decisions.retry_after);
  if (*next_write) sooner(**next_write);
  if (new_phase != "Succeeded" && new_phase != "Failed") sooner(options_.running_resync);
  return result;
}

Result<ReconcileResult> JobReconciler::Finish(const nlohmann::json& job, const JobSpec& spec,
                                              const nlohmann::json& status) {
  const std::string job_name = spec.CoordinatorJobName();
  ForgetWorkerPods(job_name);
  if (coordinator_.HasJob(job_name)) {
    (void)coordinator_.RemoveJob(job_name);
    log::Info(kComponent, job_name, "job finished: removed from the coordinator",
              {{"phase", StatusPhase(status)}});
  }
  if (!spec.ttl_seconds_after_finished) return ReconcileResult{};
  const auto completed = ParseRfc3339(status.value("completionTime", ""));
  if (!completed) return ReconcileResult{};
  const auto expires = *completed + std::chrono::seconds(*spec.ttl_seconds_after_finished);
  const auto now = SystemClock::now();
  if (now < expires) {
    return ReconcileResult{std::chrono::duration_cast<milliseconds>(expires - now) +
                           milliseconds(500)};
  }
  Event(job, false, "Expired", "Delete",
        "deleting the job: spec.ttlSecondsAfterFinished (" +
            std::to_string(*spec.ttl_seconds_after_finished) + " s) has passed since it finished");
  kube::DeleteOptions options;
  options.propagation = kube::PropagationPolicy::kBackground;
  options.precondition_uid = spec.uid;
  Status deleted = client_->Delete(HeteroTrainingJobs(), spec.ns, spec.name, options);
  if (!deleted.ok() && deleted.error().code != ErrorCode::kNotFound) return deleted.error();
  log::Info(kComponent, job_name, "deleted after spec.ttlSecondsAfterFinished",
            {{"ttl_seconds", *spec.ttl_seconds_after_finished}});
  return ReconcileResult{};
}

nlohmann::json JobReconciler::CurrentStatus(const nlohmann::json& job) {
  nlohmann::json stored = job.value("status", nlohmann::json::object());
  std::lock_guard lock(written_mutex_);
  const auto written = written_.find(job["metadata"].value("uid", ""));
  if (written != written_.end() && written->second.resource_version > VersionNumber(job)) {
    return written->second.status;
  }
  return stored;
}

Result<std::optional<milliseconds>> JobReconciler::WriteStatus(const nlohmann::json& job,
                                                               const nlohmann::json& status) {
  const nlohmann::json current = CurrentStatus(job);
  if (status == current) return std::optional<milliseconds>{};
  const std::string uid = job["metadata"].value("uid", "");
  const auto now = std::chrono::steady_clock::now();
  if (!StatusDiffersBeyondProgress(status, current)) {
    std::lock_guard lock(written_mutex_);
    const auto written = written_.find(uid);
    if (written != written_.end() && now - written->second.at < options_.status_min_interval) {
      return std::optional<milliseconds>{std::chrono::duration_cast<milliseconds>(
          options_.status_min_interval - (now - written->second.at))};
    }
  }
  // A merge patch of the whole status: no resourceVersion to go stale while the cache lags.
  auto patched = client_->Patch(HeteroTrainingJobs(), job["metadata"].value("namespace", ""),
                                job["metadata"].value("name", ""), kube::PatchType::kMerge,
                                {{"status", status}}, kube::StatusPatchOptions());
  if (!patched.ok()) return patched.error();
  std::lock_guard lock(written_mutex_);
  written_[uid] = {VersionNumber(*patched), patched->value("status", status), now};
  return std::optional<milliseconds>{};
}

void JobReconciler::Event(const nlohmann::json& regarding, bool warning, const std::string& reason,
                          const std::string& action, const std::string& note) {
  log::Info(
      kComponent,
      regarding["metadata"].value("namespace", "") + "/" + regarding["metadata"].value("name", ""),
      note, {{"reason", reason}});
  if (events_ == nullptr) return;
  events_->Record(regarding, warning ? kube::EventType::kWarning : kube::EventType::kNormal, reason,
                  action, note);
}

}  // namespace fulcrum::controller
