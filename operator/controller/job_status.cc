#include "operator/controller/job_status.h"

#include <absl/strings/str_join.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "common/rfc3339.h"

namespace fulcrum::controller {
namespace {

struct Condition {
  std::string type;
  bool status;
  std::string reason;
  std::string message;
};

// The condition as before if its status did not change (keeping lastTransitionTime), else new.
nlohmann::json Carry(const Condition& condition, const nlohmann::json& previous,
                     int64_t observed_generation, const std::string& now) {
  const std::string status = condition.status ? "True" : "False";
  std::string since = now;
  const nlohmann::json none = nlohmann::json::array();
  const nlohmann::json& old_conditions =
      previous.is_object() && previous.contains("conditions") ? previous["conditions"] : none;
  for (const nlohmann::json& old : old_conditions) {
    if (old.value("type", "") == condition.type && old.value("status", "") == status) {
      since = old.value("lastTransitionTime", now);
    }
  }
  return {{"type", condition.type},      {"status", status},
          {"reason", condition.reason},  {"message", condition.message},
          {"lastTransitionTime", since}, {"observedGeneration", observed_generation}};
}

struct DataBound {
  bool bound = false;
  double fraction = 0.0;
  std::string pod;
  std::string message;
};

nlohmann::json WithoutProgress(nlohmann::json status) {
  status.erase("step");
  status.erase("throughput");
  status.erase("summary");
  status.erase("trainingLoss");
  for (nlohmann::json& worker : status["workers"]) {
    worker.erase("samplesPerSecond");
    worker.erase("stepSeconds");
    worker.erase("dataWaitSeconds");
    worker.erase("dataWaitFraction");
  }
  for (nlohmann::json& condition : status["conditions"]) condition.erase("message");
  return status;
}

std::string Formatted(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// What `kubectl get htj` prints: the figures of `status` as people read them (the printer
// columns of a custom resource print a number as JSON has it: 960.3433732525883). Only what
// the status has: no throughput before the first steps, no accuracy before an evaluation.
nlohmann::json Summary(const nlohmann::json& status) {
  nlohmann::json summary = nlohmann::json::object();
  const nlohmann::json throughput = status.value("throughput", nlohmann::json::object());
  const auto figure = [&](const char* key) -> std::optional<double> {
    const auto found = throughput.find(key);
    if (found == throughput.end() || !found->is_number()) return std::nullopt;
    const double value = found->get<double>();
    return std::isfinite(value) && value > 0 ? std::optional<double>(value) : std::nullopt;
  };
  if (const auto rate = figure("samplesPerSecond")) {
    summary["samplesPerSecond"] = Formatted("%.0f", *rate);
  }
  if (const auto ideal = figure("idealSamplesPerSecond")) {
    summary["idealSamplesPerSecond"] = Formatted("%.0f", *ideal);
  }
  if (const auto efficiency = figure("efficiency")) {
    summary["efficiency"] = Formatted("%.0f%%", 100.0 * *efficiency);
  }
  if (status.contains("trainingLoss") && status["trainingLoss"].is_number()) {
    summary["loss"] = Formatted("%.4g", status["trainingLoss"].get<double>());
  }
  const nlohmann::json evaluation = status.value("lastEvaluation", nlohmann::json::object());
  if (evaluation.contains("accuracy") && evaluation["accuracy"].is_number()) {
    summary["accuracy"] = Formatted("%.1f%%", 100.0 * evaluation["accuracy"].get<double>());
  }
  return summary;
}

// The worker that waits for its data the largest share of its step time.
DataBound MostDataBound(const std::vector<const coordinator::MemberSnapshot*>& ranked) {
  DataBound most;
  for (const coordinator::MemberSnapshot* member : ranked) {
    if (member->last_step < 0 || member->data_wait_fraction <= most.fraction) continue;
    most.fraction = member->data_wait_fraction;
    most.pod = member->pod;
  }
  most.bound = most.fraction >= kDataBoundFraction;
  if (most.bound) {
    most.message = "worker " + most.pod + " waits for its data " +
                   std::to_string(static_cast<int>(most.fraction * 100 + 0.5)) +
                   "% of its step time: giving it fewer samples would not help; use faster "
                   "storage, a packed dataset on a local volume, or more --loader-threads";
  } else if (!most.pod.empty()) {
    most.message = "no worker waits for data more than " +
                   std::to_string(static_cast<int>(kDataBoundFraction * 100)) +
                   "% of its step time";
  }
  return most;
}

}  // namespace

nlohmann::json BuildJobStatus(const JobState& state,
                              const coordinator::JobSessionSnapshot& training,
                              const nlohmann::json& previous, const std::string& now) {
  int ready = 0;
  std::vector<const coordinator::MemberSnapshot*> ranked;
  for (const coordinator::MemberSnapshot& member : training.members) {
    if (member.rank >= 0) ranked.push_back(&member);
    if (member.rank >= 0 && member.connected) ++ready;
  }
  std::sort(ranked.begin(), ranked.end(), [](auto* a, auto* b) { return a->rank < b->rank; });
  nlohmann::json workers = nlohmann::json::array();
  for (const coordinator::MemberSnapshot* member : ranked) {
    workers.push_back({{"pod", member->pod},
                       {"node", member->node},
                       {"gpuProduct", member->gpu_product},
                       {"rank", member->rank},
                       {"localBatch", member->local_batch},
                       {"samplesPerSecond", member->samples_per_second},
                       {"stepSeconds", member->step_seconds},
                       {"dataWaitSeconds", member->data_wait_seconds},
                       {"dataWaitFraction", member->data_wait_fraction}});
  }
  const DataBound data_bound = MostDataBound(ranked);
  const bool ended = state.suspended || state.succeeded || state.failed_reason;
  const bool reestablishing = state.reestablishing && !ended && previous.is_object();
  nlohmann::json throughput = {{"samplesPerSecond", training.measured_samples_per_second},
                               {"idealSamplesPerSecond", training.ideal_samples_per_second},
                               {"efficiency", training.efficiency},
                               {"modelCalibration", training.model_calibration}};
  int64_t membership_generation = training.membership_generation;
  if (reestablishing) {
    // What users saw before the restart stands: the trainers never stopped.
    ready = previous.value("readyWorkers", ready);
    workers = previous.value("workers", workers);
    throughput = previous.value("throughput", throughput);
    membership_generation = previous.value("membershipGeneration", membership_generation);
  }
  // Trainers that finished (or stopped) close their streams together after their last step, a
  // moment before their pods are seen Succeeded: the job is not Pending in between, it keeps
  // the phase it had until the pods end it.
  const std::string previous_phase =
      previous.is_object() ? previous.value("phase", std::string()) : std::string();
  const bool finishing =
      !ended && !reestablishing && ready == 0 && !ranked.empty() && training.step >= 0 &&
      (previous_phase == "Running" || previous_phase == "Rebalancing") &&
      std::all_of(ranked.begin(), ranked.end(), [&](const coordinator::MemberSnapshot* member) {
        return !member->connected && member->last_step == training.step;
      });
  if (finishing) ready = previous.value("readyWorkers", ready);
  const bool running =
      !ended && (reestablishing || finishing || (ready >= state.min_workers && training.step >= 0));
  std::string phase = "Pending";
  if (state.failed_reason)
    phase = "Failed";
  else if (state.succeeded)
    phase = "Succeeded";
  else if (state.suspended)
    phase = "Suspended";
  else if (reestablishing)
    phase = previous.value("phase", "Running");
  else if (running)
    phase = state.rebalancing ? "Rebalancing" : "Running";

  std::string running_reason = running ? "Training" : "WaitingForWorkers";
  std::string running_message = std::to_string(ready) + " of at least " +
                                std::to_string(state.min_workers) + " workers training";
  if (!training.formation_error.empty()) {
    // The coordinator keeps retrying; say so instead of a silent stall.
    running_reason = "GenerationRetrying";
    running_message = "cannot form the next membership generation (" +
                      std::to_string(training.formation_failures) +
                      " attempts, retrying with back-off): " + training.formation_error;
  }
  const std::vector<Condition> conditions = {
      {"Created", state.created, state.created ? "ObjectsCreated" : "Creating",
       state.created ? "token Secret, Service and worker pods created"
                     : "creating the job's objects"},
      {"Running", running, running_reason, running_message},
      {"Rebalancing", running && state.rebalancing, state.rebalancing ? "NewPlan" : "Balanced",
       training.last_rebalance.reason.empty() ? "no rebalance yet"
                                              : training.last_rebalance.reason},
      {"Suspended", state.suspended, state.suspended ? "SuspendedByUser" : "NotSuspended",
       state.suspended ? "spec.suspend is true: pods deleted after a checkpoint" : ""},
      {"Succeeded", state.succeeded, state.succeeded ? "TrainingComplete" : "NotComplete",
       state.succeeded ? "every step trained" : ""},
      {"Failed", state.failed_reason.has_value(), state.failed_reason.value_or("NotFailed"),
       state.failed_message},
      {"DataBound", running && data_bound.bound,
       data_bound.bound ? "WaitingForData" : "ComputeBound", data_bound.message},
      {"SharedStorage", state.storage_problems.empty(),
       state.storage_problems.empty() ? "OnSharedVolumes" : "NotShared",
       state.storage_problems.empty()
           ? "checkpoint and output paths (where set) are on volumes every worker shares"
           : absl::StrJoin(state.storage_problems, "; ")},
      {"Reestablishing", reestablishing, reestablishing ? "CoordinatorRestarted" : "Current",
       reestablishing ? "the coordinator restarted (operator restart or new leader): phase, "
                        "workers and throughput are the last known until the trainers report "
                        "a step"
                      : ""},
  };
  // Steps completed never go back in status: a coordinator that restarted with the operator
  // knows nothing until the trainers report again.
  const int64_t previous_step =
      previous.is_object() ? previous.value("step", int64_t{0}) : int64_t{0};
  int64_t steps_done = std::max<int64_t>(previous_step, training.step + 1);
  // A trainer exits 0 only after the last step, and the last reports race the pods' end.
  if (state.succeeded && state.step_target) steps_done = std::max(steps_done, *state.step_target);
  nlohmann::json status = {{"phase", phase},
                           {"observedGeneration", state.observed_generation},
                           {"membershipGeneration", membership_generation},
                           {"readyWorkers", ready},
                           {"step", steps_done},
                           {"workers", workers},
                           {"throughput", throughput},
                           {"conditions", nlohmann::json::array()}};
  for (const Condition& condition : conditions) {
    status["conditions"].push_back(Carry(condition, previous, state.observed_generation, now));
  }
  if (training.last_rebalance.apply_at_step >= 0) {
    const std::chrono::system_clock::time_point decided{
        std::chrono::seconds(static_cast<int64_t>(training.last_rebalance.unix_seconds))};
    status["lastRebalance"] = {{"time", FormatRfc3339(decided)},
                               {"step", training.last_rebalance.apply_at_step},
                               {"reason", training.last_rebalance.reason},
                               {"predictedGain", training.last_rebalance.predicted_gain}};
    if (training.last_rebalance.predicted_step_seconds > 0.0) {
      status["lastRebalance"]["predictedStepSeconds"] =
          training.last_rebalance.predicted_step_seconds;
    }
    if (training.last_rebalance.measured_step_seconds > 0.0) {
      status["lastRebalance"]["measuredStepSeconds"] =
          training.last_rebalance.measured_step_seconds;
      status["lastRebalance"]["calibration"] = training.last_rebalance.calibration;
    }
  } else if (previous.is_object() && previous.contains("lastRebalance")) {
    status["lastRebalance"] = previous["lastRebalance"];  // from before an operator restart
  }
  if (training.global_batch > 0) {
    nlohmann::json batching = {{"mode", training.batching_mode},
                               {"globalBatchSize", training.global_batch},
                               {"learningRate", training.learning_rate},
                               {"changes", nlohmann::json::array()}};
    if (training.gradient_noise_scale > 0.0) {
      batching["gradientNoiseScale"] = training.gradient_noise_scale;
    }
    for (const coordinator::GlobalBatchChange& change : training.global_batch_changes) {
      batching["changes"].push_back({{"step", change.step},
                                     {"from", change.from},
                                     {"to", change.to},
                                     {"learningRate", change.learning_rate},
                                     {"gradientNoiseScale", change.noise_scale},
                                     {"sampleEfficiency", change.sample_efficiency},
                                     {"reason", change.reason}});
    }
    status["batching"] = std::move(batching);
  } else if (previous.is_object() && previous.contains("batching")) {
    status["batching"] = previous["batching"];  // from before an operator restart
  }
  if (std::isfinite(training.training_loss)) {
    status["trainingLoss"] = training.training_loss;
  } else if (previous.is_object() && previous.contains("trainingLoss")) {
    status["trainingLoss"] = previous["trainingLoss"];
  }
  if (const coordinator::EvaluationSnapshot& evaluation = training.last_evaluation;
      evaluation.step >= 0) {
    const std::chrono::system_clock::time_point heard{
        std::chrono::milliseconds(static_cast<int64_t>(evaluation.unix_seconds * 1000.0))};
    status["lastEvaluation"] = {{"step", evaluation.step},
                                {"loss", evaluation.loss},
                                {"samples", evaluation.samples},
                                {"seconds", evaluation.seconds},
                                {"time", FormatRfc3339(heard)}};
    if (evaluation.accuracy) status["lastEvaluation"]["accuracy"] = *evaluation.accuracy;
  } else if (previous.is_object() && previous.contains("lastEvaluation")) {
    status["lastEvaluation"] = previous["lastEvaluation"];  // from before an operator restart
  }
  if (state.succeeded && !state.output_path.empty()) {
    // Rank 0 writes both before it exits 0, and the job succeeds only after every worker did.
    status["output"] = {{"model", state.output_path + "/model.pt"},
                        {"metadata", state.output_path + "/model.json"}};
  }
  status["summary"] = Summary(status);
  if (!state.start_time.empty()) status["startTime"] = state.start_time;
  if (!state.completion_time.empty()) status["completionTime"] = state.completion_time;
  if (!state.failures.empty()) {
    status["workerFailures"] = nlohmann::json::array();
    for (const WorkerFailure& failure : state.failures) {
      status["workerFailures"].push_back({{"pod", failure.pod},
                                          {"uid", failure.uid},
                                          {"reason", failure.reason},
                                          {"time", failure.time}});
    }
  }
  if (!state.released.empty()) {
    status["releasedWorkers"] = nlohmann::json::array();
    for (const ReleasedWorker& worker : state.released) {
      status["releasedWorkers"].push_back({{"pod", worker.pod},
                                           {"node", worker.node},
                                           {"gpuProduct", worker.gpu_product},
                                           {"predictedGain", worker.predicted_gain},
                                           {"time", worker.time}});
    }
  }
  return status;
}

std::vector<ReleasedWorker> ReadReleasedWorkers(const nlohmann::json& status) {
  std::vector<ReleasedWorker> released;
  if (!status.is_object() || !status.contains("releasedWorkers")) return released;
  for (const nlohmann::json& item : status["releasedWorkers"]) {
    if (!item.is_object()) continue;
    released.push_back({item.value("pod", ""), item.value("node", ""), item.value("gpuProduct", ""),
                        item.value("predictedGain", 0.0), item.value("time", "")});
  }
  return released;
}

std::vector<WorkerFailure> ReadWorkerFailures(const nlohmann::json& status) {
  std::vector<WorkerFailure> failures;
  if (!status.is_object() || !status.contains("workerFailures")) return failures;
  for (const nlohmann::json& item : status["workerFailures"]) {
    if (!item.is_object()) continue;
    failures.push_back({item.value("pod", ""), item.value("uid", ""), item.value("reason", ""),
                        item.value("time", "")});
  }
  return failures;
}

bool ConditionIsTrue(const nlohmann::json& status, const std::string& type) {
  if (!status.is_object() || !status.contains("conditions")) return false;
  for (const nlohmann::json& condition : status["conditions"]) {
    if (condition.value("type", "") == type) return condition.value("status", "") == "True";
  }
  return false;
}

bool StatusDiffersBeyondProgress(const nlohmann::json& a, const nlohmann::json& b) {
  return WithoutProgress(a) != WithoutProgress(b);
}

}  // namespace fulcrum::controller
