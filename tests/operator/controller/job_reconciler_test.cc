// The reconciler against filled informer caches, a recording JobWriter and a fake coordinator
// registry, the way controller-runtime tests a reconciler with its fake client: each case sets
// up a world, reconciles once and checks the writes it made (and that an unchanged world gets
// none).
#include "operator/controller/job_reconciler.h"

#include <absl/strings/escaping.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "common/rfc3339.h"
#include "operator/controller/job_status.h"
#include "operator/kube/cache/cached_object.h"

namespace fulcrum::controller {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::UnorderedElementsAre;
using SystemClock = std::chrono::system_clock;

struct Write {
  std::string verb;  // create, patch, patch-status, delete
  std::string resource;
  std::string name;
  nlohmann::json body;
  kube::DeleteOptions delete_options{};
};

// Records every write and answers as the API server would (a uid and a new resourceVersion).
class RecordingWriter final : public JobWriter {
 public:
  Result<nlohmann::json> Create(const kube::ResourceType& type, const std::string&,
                                const nlohmann::json& object) override {
    nlohmann::json stored = object;
    const std::string name = object["metadata"].value("name", "");
    stored["metadata"]["uid"] = "uid-" + name;
    stored["metadata"]["resourceVersion"] = std::to_string(++version);
    if (stored.contains("stringData")) {  // the API server stores a Secret's stringData as data
      for (auto& [key, value] : stored["stringData"].items()) {
        stored["data"][key] = absl::Base64Escape(value.get<std::string>());
      }
      stored.erase("stringData");
    }
    writes.push_back({"create", type.resource, name, stored});
    return stored;
  }
  Result<nlohmann::json> Get(const kube::ResourceType& type, const std::string&,
                             const std::string& name) override {
    return Error{ErrorCode::kNotFound, type.resource + " " + name + " not found", ""};
  }
  Result<nlohmann::json> Patch(const kube::ResourceType& type, const std::string&,
                               const std::string& name, const nlohmann::json& patch) override {
    writes.push_back({"patch", type.resource, name, patch});
    return nlohmann::json{{"metadata", {{"resourceVersion", std::to_string(++version)}}}};
  }
  Result<nlohmann::json> PatchStatus(const kube::ResourceType& type, const std::string&,
                                     const std::string& name,
                                     const nlohmann::json& patch) override {
    writes.push_back({"patch-status", type.resource, name, patch});
    return nlohmann::json{{"metadata", {{"resourceVersion", std::to_string(++version)}}},
                          {"status", patch["status"]}};
  }
  Status Delete(const kube::ResourceType& type, const std::string&, const std::string& name,
                const kube::DeleteOptions& options) override {
    writes.push_back({"delete", type.resource, name, nullptr, options});
    return Ok();
  }
  void Event(const nlohmann::json&, const EventNote& note) override { events.push_back(note); }

  std::vector<Write> Of(const std::string& verb) const {
    std::vector<Write> matching;
    for (const Write& write : writes) {
      if (write.verb == verb) matching.push_back(write);
    }
    return matching;
  }
  std::vector<std::string> CreatedPods() const {
    std::vector<std::string> names;
    for (const Write& write : Of("create")) {
      if (write.resource == "pods") names.push_back(write.name);
    }
    return names;
  }
  // The status of the last status write.
  nlohmann::json LastStatus() const {
    const std::vector<Write> statuses = Of("patch-status");
    return statuses.empty() ? nlohmann::json() : statuses.back().body["status"];
  }
  std::vector<std::string> EventReasons() const {
    std::vector<std::string> reasons;
    for (const EventNote& event : events) reasons.push_back(event.reason);
    return reasons;
  }
  void Clear() {
    writes.clear();
    events.clear();
  }

  std::vector<Write> writes;
  std::vector<EventNote> events;
  int64_t version = 100;
};

class FakeRegistry final : public coordinator::JobRegistry {
 public:
  Status AddJob(coordinator::JobSessionConfig config) override {
    configs[config.name] = config;
    return Ok();
  }
  bool HasJob(const std::string& name) const override { return configs.contains(name); }
  Status RemoveJob(const std::string& name) override {
    configs.erase(name);
    removed.push_back(name);
    return Ok();
  }
  Status SendControl(const std::string& job, fulcrum::v1::Control::Action action,
                     const std::string&) override {
    controls.emplace_back(job, action);
    return Ok();
  }
  std::optional<coordinator::JobSessionSnapshot> SnapshotOf(
      const std::string& name) const override {
    if (!configs.contains(name)) return std::nullopt;
    return snapshot;
  }

  std::map<std::string, coordinator::JobSessionConfig> configs;
  std::vector<std::string> removed;
  std::vector<std::pair<std::string, fulcrum::v1::Control::Action>> controls;
  coordinator::JobSessionSnapshot snapshot;
};

constexpr const char* kKey = "team-a/mixed-gpus";

nlohmann::json Job() {
  return nlohmann::json::parse(R"({
    "apiVersion": "fulcrum.dev/v1alpha1", "kind": "HeteroTrainingJob",
    "metadata": {"name": "mixed-gpus", "namespace": "team-a", "uid": "u-123", "generation": 1,
                 "resourceVersion": "10", "finalizers": ["fulcrum.dev/coordinator"]},
    "spec": {
      "model": {"builtin": "cnn"},
      "dataset": {"synthetic": {"samples": 50000, "seed": 1}},
      "globalBatchSize": 96, "replicas": {"min": 2, "max": 2}, "gpusPerWorker": 1,
      "balancing": {"policy": "optimal", "minGain": 0.05, "intervalSteps": 50},
      "training": {"steps": 600, "optimizer": "sgd", "learningRate": 0.05, "momentum": 0.9},
      "suspend": false, "runPolicy": {"backoffLimit": 3}}})");
}

nlohmann::json GpuNodeObject(const std::string& name) {
  return {{"metadata",
           {{"name", name},
            {"labels",
             {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB"},
              {"nvidia.com/gpu.memory", "40960"},
              {"nvidia.com/gpu.count", "1"}}}}},
          {"status",
           {{"allocatable", {{"cpu", "8"}, {"nvidia.com/gpu", "1"}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

std::string Ago(std::chrono::seconds age) {
  return FormatRfc3339(SystemClock::now() - age);
}

// A trainer pod of the job as the pod informer has it.
nlohmann::json TrainerPodObject(int index, const std::string& phase, const std::string& node) {
  const std::string name = "mixed-gpus-worker-" + std::to_string(index);
  return {{"metadata",
           {{"name", name},
            {"namespace", "team-a"},
            {"uid", "uid-" + name},
            {"resourceVersion", "50"},
            {"labels",
             {{"fulcrum.dev/job", "mixed-gpus"}, {"fulcrum.dev/worker", std::to_string(index)}}},
            {"ownerReferences",
             {{{"apiVersion", "fulcrum.dev/v1alpha1"},
               {"kind", "HeteroTrainingJob"},
               {"name", "mixed-gpus"},
               {"uid", "u-123"},
               {"controller", true}}}}}},
          {"spec",
           {{"nodeName", node},
            {"containers",
             {{{"name", "trainer"}, {"resources", {{"limits", {{"nvidia.com/gpu", "1"}}}}}}}}}},
          {"status", {{"phase", phase}}}};
}

class JobReconcilerTest : public ::testing::Test {
 protected:
  JobReconcilerTest() {
    (void)pods.AddIndex(kube::indexes::kOwnerUid, kube::indexes::ByOwnerUid());
    inventory.Upsert(GpuNodeObject("a100-0"));
    inventory.Upsert(GpuNodeObject("a100-1"));
    options.stop_grace = std::chrono::seconds(60);
  }

  JobReconciler Reconciler() {
    return JobReconciler(writer, {&jobs, &pods, &secrets, &services, &policies}, inventory,
                         registry, options);
  }
  void Store(kube::Store& store, const nlohmann::json& object) {
    store.Upsert(kube::CachedObject::FromJson(object));
  }
  // What the API server holds after the writes so far: created objects in their caches (a
  // Secret's data), the job's finalizers and last status.
  void ApplyWrites(nlohmann::json& job) {
    for (const Write& write : writer.writes) {
      if (write.verb == "create") {
        const nlohmann::json& object = write.body;
        if (write.resource == "secrets") Store(secrets, object);
        if (write.resource == "services") Store(services, object);
        if (write.resource == "networkpolicies") Store(policies, object);
        if (write.resource == "pods") Store(pods, object);
      } else if (write.verb == "patch" && write.resource == "heterotrainingjobs") {
        job["metadata"]["finalizers"] = write.body["metadata"]["finalizers"];
      } else if (write.verb == "patch-status") {
        job["status"] = write.body["status"];
      }
    }
    job["metadata"]["resourceVersion"] = std::to_string(writer.version);
    Store(jobs, job);
  }

  kube::Store jobs, pods, secrets, services, policies;
  NodeInventory inventory;
  RecordingWriter writer;
  FakeRegistry registry;
  ReconcilerOptions options;
};

TEST_F(JobReconcilerTest, FirstReconcileMakesTheJobsObjectsRegistersItAndCreatesItsWorkers) {
  Store(jobs, Job());
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  std::vector<std::string> created;
  for (const Write& write : writer.Of("create"))
    created.push_back(write.resource + "/" + write.name);
  EXPECT_THAT(created, ElementsAre("secrets/mixed-gpus-token", "services/mixed-gpus-workers",
                                   "networkpolicies/mixed-gpus-trainers",
                                   "pods/mixed-gpus-worker-0", "pods/mixed-gpus-worker-1"));
  EXPECT_TRUE(registry.HasJob(kKey));
  EXPECT_EQ(registry.configs[kKey].global_batch, 96);
  EXPECT_EQ(writer.LastStatus()["phase"], "Pending");
  EXPECT_THAT(writer.EventReasons(), ElementsAre("CreatedWorker"));
}

TEST_F(JobReconcilerTest, TheJobTokenIs32RandomBytesAndDiffersBetweenJobs) {
  Store(jobs, Job());
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  nlohmann::json other = Job();
  other["metadata"]["name"] = "other";
  other["metadata"]["uid"] = "u-456";
  Store(jobs, other);
  ASSERT_TRUE(Reconciler().Reconcile("team-a/other").ok());
  std::vector<std::string> tokens;
  for (const Write& write : writer.Of("create")) {
    std::string token;
    if (write.resource != "secrets") continue;
    ASSERT_TRUE(absl::Base64Unescape(write.body["data"]["token"].get<std::string>(), &token));
    tokens.push_back(token);
  }
  ASSERT_EQ(tokens.size(), 2u);
  EXPECT_EQ(tokens[0].size(), 64u);  // hex
  EXPECT_NE(tokens[0], tokens[1]);
}

TEST_F(JobReconcilerTest, ASecondReconcileOfAnUnchangedWorldWritesNothing) {
  nlohmann::json job = Job();
  job["metadata"].erase("finalizers");
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  ASSERT_FALSE(writer.writes.empty());
  ApplyWrites(job);
  writer.Clear();
  JobReconciler again = Reconciler();
  ASSERT_TRUE(again.Reconcile(kKey).ok());
  EXPECT_THAT(writer.writes, IsEmpty());
  EXPECT_THAT(writer.events, IsEmpty());
}

TEST_F(JobReconcilerTest, AJobWithoutTheFinalizerGetsItBeforeAnythingElse) {
  nlohmann::json job = Job();
  job["metadata"].erase("finalizers");
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  ASSERT_FALSE(writer.writes.empty());
  const Write& first = writer.writes.front();
  EXPECT_EQ(first.verb, "patch");
  EXPECT_EQ(first.body["metadata"]["finalizers"], nlohmann::json::array({kFinalizer}));
  // Conditional: a finalizer another controller added meanwhile is not lost.
  EXPECT_EQ(first.body["metadata"]["resourceVersion"], "10");
}

TEST_F(JobReconcilerTest, ADeletedJobLeavesTheCoordinatorAndReleasesItsFinalizer) {
  nlohmann::json job = Job();
  job["metadata"]["deletionTimestamp"] = Ago(std::chrono::seconds(1));
  Store(jobs, job);
  registry.configs[kKey] = {};
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_THAT(registry.removed, ElementsAre(kKey));
  ASSERT_EQ(writer.writes.size(), 1u);
  EXPECT_EQ(writer.writes[0].verb, "patch");
  EXPECT_EQ(writer.writes[0].body["metadata"]["finalizers"], nlohmann::json::array());
}

TEST_F(JobReconcilerTest, AJobPastItsActiveDeadlineFailsAndItsPodsAreDeleted) {
  nlohmann::json job = Job();
  job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 60;
  job["status"] = {{"phase", "Running"}, {"startTime", Ago(std::chrono::seconds(120))}};
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Running", "a100-0"));
  Store(pods, TrainerPodObject(1, "Running", "a100-1"));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  std::vector<std::string> deleted;
  for (const Write& write : writer.Of("delete")) deleted.push_back(write.name);
  EXPECT_THAT(deleted, UnorderedElementsAre("mixed-gpus-worker-0", "mixed-gpus-worker-1"));
  EXPECT_THAT(writer.CreatedPods(), IsEmpty());
  const nlohmann::json status = writer.LastStatus();
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_TRUE(status.contains("completionTime"));
  EXPECT_THAT(writer.EventReasons(), ElementsAre("DeadlineExceeded"));
  EXPECT_THAT(writer.events[0].note, HasSubstr("spec.activeDeadlineSeconds (60 s)"));
}

TEST_F(JobReconcilerTest, AJobWithinItsActiveDeadlineKeepsRunning) {
  nlohmann::json job = Job();
  job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 600;
  job["status"] = {{"phase", "Running"}, {"startTime", Ago(std::chrono::seconds(120))}};
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Running", "a100-0"));
  Store(pods, TrainerPodObject(1, "Running", "a100-1"));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_THAT(writer.Of("delete"), IsEmpty());
  EXPECT_NE(writer.LastStatus().value("phase", ""), "Failed");
}

TEST_F(JobReconcilerTest, AFinishedJobIsDeletedOnceItsTtlHasPassedAndNotBefore) {
  nlohmann::json job = Job();
  job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 300;
  job["status"] = {{"phase", "Succeeded"}, {"completionTime", Ago(std::chrono::seconds(100))}};
  Store(jobs, job);
  registry.configs[kKey] = {};
  Result<ReconcileResult> early = Reconciler().Reconcile(kKey);
  ASSERT_TRUE(early.ok());
  EXPECT_THAT(writer.Of("delete"), IsEmpty());
  ASSERT_TRUE(early->requeue_after.has_value());
  EXPECT_GT(*early->requeue_after, std::chrono::seconds(190));
  EXPECT_LE(*early->requeue_after, std::chrono::seconds(201));
  EXPECT_THAT(registry.removed, ElementsAre(kKey));  // a finished job leaves the coordinator

  job["status"]["completionTime"] = Ago(std::chrono::seconds(301));
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  ASSERT_EQ(writer.Of("delete").size(), 1u);
  const Write deleted = writer.Of("delete")[0];
  EXPECT_EQ(deleted.resource, "heterotrainingjobs");
  EXPECT_EQ(deleted.delete_options.precondition_uid, "u-123");
  EXPECT_EQ(deleted.delete_options.propagation, kube::PropagationPolicy::kBackground);
  EXPECT_THAT(writer.EventReasons(), ElementsAre("Expired"));
}

TEST_F(JobReconcilerTest, AnInvalidSpecFailsTheJobOnceWithAnInvalidSpecEvent) {
  nlohmann::json job = Job();
  job["spec"]["globalBatchSize"] = -1;
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  const nlohmann::json status = writer.LastStatus();
  EXPECT_EQ(status["phase"], "Failed");
  EXPECT_THAT(writer.EventReasons(), ElementsAre("InvalidSpec"));
  EXPECT_THAT(writer.events[0].note, HasSubstr("spec.globalBatchSize"));
  EXPECT_THAT(writer.Of("create"), IsEmpty());  // not even the token Secret
  EXPECT_FALSE(registry.HasJob(kKey));

  ApplyWrites(job);
  writer.Clear();
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_THAT(writer.writes, IsEmpty());
  EXPECT_THAT(writer.events, IsEmpty());
}

nlohmann::json SuspendedStatus(std::chrono::seconds since) {
  return {{"phase", "Suspended"},
          {"startTime", Ago(std::chrono::seconds(600))},
          {"conditions",
           {{{"type", "Suspended"},
             {"status", "True"},
             {"reason", "SuspendedByUser"},
             {"lastTransitionTime", Ago(since)}}}}};
}

TEST_F(JobReconcilerTest, ASuspendedJobsTrainersAreToldToStopAndKeptWithinTheGrace) {
  nlohmann::json job = Job();
  job["spec"]["suspend"] = true;
  job["status"] = SuspendedStatus(std::chrono::seconds(10));
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Running", "a100-0"));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_THAT(registry.controls, ElementsAre(std::pair<std::string, fulcrum::v1::Control::Action>(
                                     kKey, fulcrum::v1::Control::STOP)));
  EXPECT_THAT(writer.Of("delete"), IsEmpty());
  EXPECT_THAT(writer.EventReasons(), Not(Contains("StopTimedOut")));
}

TEST_F(JobReconcilerTest, ASuspendedJobsTrainerThatOutlivesTheStopGraceIsDeletedStopTimedOut) {
  nlohmann::json job = Job();
  job["spec"]["suspend"] = true;
  job["status"] = SuspendedStatus(std::chrono::seconds(120));
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Running", "a100-0"));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  ASSERT_EQ(writer.Of("delete").size(), 1u);
  EXPECT_EQ(writer.Of("delete")[0].name, "mixed-gpus-worker-0");
  EXPECT_EQ(writer.Of("delete")[0].delete_options.precondition_uid, "uid-mixed-gpus-worker-0");
  EXPECT_THAT(writer.events, Contains(Field(&EventNote::reason, "StopTimedOut")));
  EXPECT_THAT(writer.CreatedPods(), IsEmpty());
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

TEST_F(JobReconcilerTest, AfterAnOperatorRestartARunningJobStaysRunningUntilTheTrainersReport) {
  nlohmann::json job = Job();
  job["status"] = {
      {"phase", "Running"},
      {"startTime", Ago(std::chrono::seconds(600))},
      {"readyWorkers", 2},
      {"step", 500},
      {"workers", {{{"pod", "mixed-gpus-worker-0"}}, {{"pod", "mixed-gpus-worker-1"}}}},
      {"throughput", {{"samplesPerSecond", 900.0}}}};
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Running", "a100-0"));
  Store(pods, TrainerPodObject(1, "Running", "a100-1"));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());  // the registry knows nothing: a new process
  const nlohmann::json status = writer.LastStatus();
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["readyWorkers"], 2);
  EXPECT_EQ(status["step"], 500);
  EXPECT_EQ(status["throughput"]["samplesPerSecond"], 900.0);
  EXPECT_TRUE(ConditionIsTrue(status, "Reestablishing"));
  EXPECT_THAT(writer.CreatedPods(), IsEmpty());
  EXPECT_THAT(writer.EventReasons(), Not(Contains("Started")));

  // The trainers report again: the figures are the coordinator's, the condition clears.
  ApplyWrites(job);
  writer.Clear();
  registry.snapshot.step = 510;
  registry.snapshot.membership_generation = 1;
  for (int rank = 0; rank < 2; ++rank) {
    coordinator::MemberSnapshot member;
    member.pod = "mixed-gpus-worker-" + std::to_string(rank);
    member.connected = true;
    member.rank = rank;
    registry.snapshot.members.push_back(member);
  }
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_EQ(writer.LastStatus()["phase"], "Running");
  EXPECT_FALSE(ConditionIsTrue(writer.LastStatus(), "Reestablishing"));
  EXPECT_THAT(writer.EventReasons(), Not(Contains("Started")));
}

TEST_F(JobReconcilerTest, AJobWhoseTrainersAreGoneIsNotHeldRunningAfterARestart) {
  nlohmann::json job = Job();
  job["status"] = {{"phase", "Running"}, {"readyWorkers", 2}, {"step", 500}};
  Store(jobs, job);
  Store(pods, TrainerPodObject(0, "Pending", ""));
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_EQ(writer.LastStatus()["phase"], "Pending");
  EXPECT_FALSE(ConditionIsTrue(writer.LastStatus(), "Reestablishing"));
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

// Two workers training in generation `generation`, as the coordinator reports them.
coordinator::JobSessionSnapshot TwoWorkers(int64_t generation, int64_t step) {
  coordinator::JobSessionSnapshot training;
  training.membership_generation = generation;
  training.step = step;
  training.plan = {64, 32};
  for (int rank = 0; rank < 2; ++rank) {
    coordinator::MemberSnapshot member;
    member.pod = "mixed-gpus-worker-" + std::to_string(rank);
    member.connected = true;
    member.rank = rank;
    member.local_batch = training.plan[static_cast<std::size_t>(rank)];
    training.members.push_back(member);
  }
  return training;
}

class JobEventsTest : public JobReconcilerTest {
 protected:
  // Reconciles a running job from `before` to `after` and returns the Events it recorded.
  std::vector<EventNote> EventsBetween(const coordinator::JobSessionSnapshot& before,
                                       const coordinator::JobSessionSnapshot& after) {
    nlohmann::json job = Job();
    Store(jobs, job);
    Store(pods, TrainerPodObject(0, "Running", "a100-0"));
    Store(pods, TrainerPodObject(1, "Running", "a100-1"));
    registry.snapshot = before;
    EXPECT_TRUE(Reconciler().Reconcile(kKey).ok());
    ApplyWrites(job);
    writer.Clear();
    registry.snapshot = after;
    EXPECT_TRUE(Reconciler().Reconcile(kKey).ok());
    return writer.events;
  }
};

TEST_F(JobEventsTest, ANewGenerationAndItsPlanAreOneEventNamingTheRealStepAndWhy) {
  coordinator::JobSessionSnapshot before = TwoWorkers(2, 480);
  before.generation_reason = "joined: mixed-gpus-worker-1";
  before.generation_step = 3;
  before.last_rebalance = {.apply_at_step = 3,
                           .reason = "joined: mixed-gpus-worker-1",
                           .unix_seconds = 1.7e9,
                           .batches = {64, 32},
                           .predicted_gain = 0};
  coordinator::JobSessionSnapshot after = TwoWorkers(3, 505);
  after.generation_reason = "left: mixed-gpus-worker-2";
  after.generation_step = 501;
  after.last_rebalance = {.apply_at_step = 501,
                          .reason = "first plan",
                          .unix_seconds = 1.7e9 + 60,
                          .batches = {64, 32},
                          .predicted_gain = 0};
  const std::vector<EventNote> events = EventsBetween(before, after);
  ASSERT_EQ(events.size(), 1u) << events[0].note;
  EXPECT_EQ(events[0].reason, "MembershipChanged");
  EXPECT_EQ(events[0].note,
            "step 501: membership generation 3 (left: mixed-gpus-worker-2): 2 workers, local "
            "batches 64/32");
}

TEST_F(JobEventsTest, ASpeedRebalanceWithinAGenerationIsARebalancedEvent) {
  coordinator::JobSessionSnapshot before = TwoWorkers(2, 480);
  before.generation_reason = "joined: mixed-gpus-worker-1";
  before.generation_step = 3;
  coordinator::JobSessionSnapshot after = before;
  after.step = 530;
  after.plan = {80, 16};
  after.last_rebalance = {.apply_at_step = 528,
                          .reason = "predicted step time 0.1200 s -> 0.0950 s",
                          .unix_seconds = 1.7e9,
                          .batches = {80, 16},
                          .predicted_gain = 0.2};
  const std::vector<EventNote> events = EventsBetween(before, after);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, "Rebalanced");
  EXPECT_THAT(events[0].note, HasSubstr("step 528: predicted step time"));
}

// The same rebalance measured over its first steps (its step time and calibration filled in)
// is not news again: each update was an Event, and 25 of them made the rate limit drop the
// job's Succeeded in the e2e run.
TEST_F(JobEventsTest, ARebalanceMeasuredLaterIsNotASecondRebalancedEvent) {
  coordinator::JobSessionSnapshot before = TwoWorkers(2, 530);
  before.generation_reason = "joined: mixed-gpus-worker-1";
  before.generation_step = 3;
  before.last_rebalance = {.apply_at_step = 528,
                           .reason = "predicted step time 0.1200 s -> 0.0950 s",
                           .unix_seconds = 1.7e9,
                           .batches = {80, 16},
                           .predicted_gain = 0.2,
                           .predicted_step_seconds = 0.095};
  coordinator::JobSessionSnapshot after = before;
  after.step = 533;
  after.last_rebalance.measured_step_seconds = 0.1;
  after.last_rebalance.measured_steps = 4;
  after.last_rebalance.calibration = 0.95;
  EXPECT_THAT(EventsBetween(before, after), IsEmpty());
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

TEST_F(JobReconcilerTest, ACheckpointPathOnNoSharedVolumeRaisesAConditionAndOneEvent) {
  nlohmann::json job = Job();
  job["spec"]["checkpoint"] = {{"path", "/ckpt"}, {"everySteps", 100}};
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  const nlohmann::json status = writer.LastStatus();
  EXPECT_FALSE(ConditionIsTrue(status, "SharedStorage"));
  EXPECT_THAT(writer.EventReasons(), Contains("StorageNotShared"));
  ApplyWrites(job);
  writer.Clear();
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_THAT(writer.EventReasons(), Not(Contains("StorageNotShared"))) << "said once";
}

TEST_F(JobReconcilerTest, ACheckpointPathOnAClaimIsShared) {
  nlohmann::json job = Job();
  job["spec"]["checkpoint"] = {{"path", "/work/ckpt"}, {"everySteps", 100}};
  job["spec"]["template"] = nlohmann::json::parse(R"({"spec": {
      "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": "training"}}],
      "containers": [{"name": "trainer",
                      "volumeMounts": [{"name": "work", "mountPath": "/work"}]}]}})");
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_TRUE(ConditionIsTrue(writer.LastStatus(), "SharedStorage"));
  EXPECT_THAT(writer.EventReasons(), Not(Contains("StorageNotShared")));
}

}  // namespace
}  // namespace fulcrum::controller

namespace fulcrum::controller {
namespace {

TEST_F(JobReconcilerTest, AGpuTheCudaImageCannotRunGetsNoWorkerAndAnEventSaysWhy) {
  nlohmann::json v100 = GpuNodeObject("v100-0");
  v100["metadata"]["labels"]["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-16GB";
  inventory.Upsert(v100);
  nlohmann::json job = Job();
  job["spec"]["replicas"] = {{"min", 1}, {"max", 3}};
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_EQ(writer.CreatedPods().size(), 2u) << "the two A100s, not the V100";
  ASSERT_THAT(writer.events, Contains(Field(&EventNote::reason, "GpuNotSupported")));
  for (const EventNote& event : writer.events) {
    if (event.reason != "GpuNotSupported") continue;
    EXPECT_THAT(event.note, HasSubstr("Tesla-V100-SXM2-16GB (compute capability 7.0)"));
    EXPECT_THAT(event.note, HasSubstr("7.5 and newer"));
  }
  for (const Write& write : writer.Of("create")) {
    if (write.resource != "pods") continue;
    EXPECT_THAT(write.body["spec"]["affinity"].dump(), HasSubstr("Tesla-V100-SXM2-16GB"))
        << "the pod's affinity keeps it off the V100";
  }
}

TEST_F(JobReconcilerTest, OnEmulatedGpusEveryProductTakesWorkers) {
  nlohmann::json v100 = GpuNodeObject("v100-0");
  v100["metadata"]["labels"]["nvidia.com/gpu.product"] = "Tesla-V100-SXM2-16GB";
  inventory.Upsert(v100);
  options.emulated_gpus = true;
  nlohmann::json job = Job();
  job["spec"]["replicas"] = {{"min", 1}, {"max", 3}};
  Store(jobs, job);
  ASSERT_TRUE(Reconciler().Reconcile(kKey).ok());
  EXPECT_EQ(writer.CreatedPods().size(), 3u);
  EXPECT_THAT(writer.EventReasons(), Not(Contains("GpuNotSupported")));
}

}  // namespace
}  // namespace fulcrum::controller
