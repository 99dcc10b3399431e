// The control loop: plans at once on membership changes and OOM, otherwise only when the
// predicted gain is worth it, so noise does not make it oscillate but a real slowdown does
// move it within one re-plan interval.
#include "operator/balancer/controller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "operator/balancer/optimal_policy.h"
#include "operator/balancer/planner.h"
#include "tests/operator/balancer/cluster_model.h"

namespace fulcrum::balancer {
namespace {

using ::testing::HasSubstr;

struct FakeWorker {
  std::string id;
  std::string gpu;
  LinearCost truth;
  double slowdown = 1.0;
};

// Runs workers against a controller, reporting only what a trainer would: noisy timings.
class FakeCluster {
 public:
  FakeCluster(std::vector<FakeWorker> workers, double noise, uint64_t seed)
      : workers_(std::move(workers)), noise_(0.0, noise), random_(seed) {}

  Status Join(Controller& controller) {
    for (const FakeWorker& worker : workers_) {
      if (Status status = controller.AddWorker({worker.id, worker.gpu}); !status.ok()) {
        return status;
      }
    }
    return Ok();
  }

  // One training step; returns whether the plan changed.
  bool Step(Controller& controller, int64_t step) {
    Result<StepDecision> decision = controller.Decide(step);
    EXPECT_TRUE(decision.ok()) << decision.error().ToString();
    EXPECT_EQ(std::accumulate(decision->batches.begin(), decision->batches.end(), 0),
              controller.plan().global_batch);
    std::vector<double> compute(workers_.size());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      compute[i] = workers_[i].truth.Seconds(decision->batches[i]) * workers_[i].slowdown;
    }
    const double slowest = *std::max_element(compute.begin(), compute.end());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const StepReport report{workers_[i].id,
                              step,
                              decision->batches[i],
                              1,
                              compute[i] * (1 + noise_(random_)),
                              slowest - compute[i] + 0.01};
      EXPECT_TRUE(controller.Observe(report).ok());
    }
    return decision->plan_changed;
  }

  FakeWorker& worker(std::size_t i) { return workers_[i]; }

  // η of the controller's current plan under the true costs (what the run would measure).
  double TrueEfficiency(const Controller& controller) const {
    PlanRequest truth;
    truth.global_batch = controller.plan().global_batch;
    std::vector<int> batches;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const LinearCost cost = workers_[i].truth.Scaled(workers_[i].slowdown);
      truth.workers.push_back(
          {workers_[i].id, cost.fixed_seconds, cost.seconds_per_sample, 1, truth.global_batch, 0});
      batches.push_back(controller.plan().workers[i].batch);
    }
    const Result<Plan> best = MakePlan(truth, OptimalPolicy());
    EXPECT_TRUE(best.ok());
    return best->step_seconds / PredictStepSeconds(truth, batches, 1);
  }

 private:
  std::vector<FakeWorker> workers_;
  std::normal_distribution<double> noise_;
  std::mt19937_64 random_;
};

// Claims about runs with noisy timings hold for every one of these seeds, not
// for one lucky draw.
constexpr uint64_t kSeeds = 50;

std::vector<FakeWorker> EightMixedWorkers() {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 8; ++i) {
    const bool fast = i < 4;
    workers.push_back({"w" + std::to_string(i), fast ? "NVIDIA-A100-SXM4-80GB" : "Tesla-V100",
                       fast ? LinearCost{0.034, 0.000272} : LinearCost{0.034, 0.000701}});
  }
  return workers;
}

// 4 A100 + 4 V100 + 8 T4, as in bench/scenarios/mixed16.yaml.
std::vector<FakeWorker> SixteenMixedWorkers() {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 16; ++i) {
    const std::string id = "w" + std::to_string(i);
    if (i < 4) {
      workers.push_back({id, "NVIDIA-A100-SXM4-80GB", {0.034, 0.0002716}});
    } else if (i < 8) {
      workers.push_back({id, "Tesla-V100-SXM2-16GB", {0.034, 0.000700}});
    } else {
      workers.push_back({id, "Tesla-T4", {0.018, 0.002283}});
    }
  }
  return workers;
}

ControllerConfig Config(int global_batch) {
  ControllerConfig config;
  config.global_batch = global_batch;
  return config;
}

StepReport Report(std::string worker_id) {
  StepReport report;
  report.worker_id = std::move(worker_id);
  return report;
}

std::vector<int> PlannedBatches(const Controller& controller) {
  std::vector<int> planned;
  for (const WorkerAssignment& w : controller.plan().workers) planned.push_back(w.batch);
  return planned;
}

Controller MakeController(const ControllerConfig& config) {
  Result<Controller> controller = Controller::Create(config);
  EXPECT_TRUE(controller.ok());
  return std::move(*controller);
}

Controller MakeController(int interval_steps = 10) {
  ControllerConfig config = Config(1024);
  config.interval_steps = interval_steps;
  return MakeController(config);
}

TEST(Controller, FirstPlanUsesCatalogSpeeds) {
  Controller controller = MakeController();
  ASSERT_TRUE(controller.AddWorker({"fast", "NVIDIA-A100-SXM4-80GB"}).ok());
  ASSERT_TRUE(controller.AddWorker({"slow", "Tesla-T4"}).ok());
  Result<StepDecision> decision = controller.Decide(0);
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->plan_changed);
  EXPECT_EQ(controller.plan().reason, "first plan");
  EXPECT_GT(controller.plan().workers[0].batch, 4 * controller.plan().workers[1].batch);
}

TEST(Controller, StationaryNoiseChangesThePlanOnlyAFewTimesIn10000Steps) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController();
    FakeCluster cluster(EightMixedWorkers(), 0.05, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    int changes = 0;
    for (int64_t step = 0; step < 10000; ++step) changes += cluster.Step(controller, step);
    // The first plan, what the first measurements correct, and at most a refinement or two.
    EXPECT_LE(changes, 4);
    EXPECT_EQ(changes, controller.plan_changes());
    EXPECT_GT(controller.plan().efficiency, 0.99);
  }
}

// Eight mixed workers settle for 300 steps, then worker 5 becomes 2x slower.
struct SlowdownOutcome {
  int64_t steps_to_change = -1;  // from the slowdown to the first plan change; -1: none in 100
  int batch_before = 0;
  Plan plan_after;
};

SlowdownOutcome TwofoldSlowdownOfWorkerFive(int interval_steps, uint64_t seed) {
  Controller controller = MakeController(interval_steps);
  FakeCluster cluster(EightMixedWorkers(), 0.05, seed);
  EXPECT_TRUE(cluster.Join(controller).ok());
  for (int64_t step = 0; step < 300; ++step) cluster.Step(controller, step);
  SlowdownOutcome outcome;
  outcome.batch_before = controller.plan().workers[5].batch;
  cluster.worker(5).slowdown = 2.0;
  for (int64_t step = 300; step < 400; ++step) {
    // The first speed rebalance: a refinement of the old plan can fall on the slowdown's step.
    if (cluster.Step(controller, step) &&
        controller.plan().reason.starts_with("predicted step time")) {
      outcome.steps_to_change = step - 300;
      break;
    }
  }
  outcome.plan_after = controller.plan();
  return outcome;
}

TEST(Controller, RealTwofoldSlowdownChangesThePlanWithinOneInterval) {
  constexpr int kInterval = 10;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownOutcome outcome = TwofoldSlowdownOfWorkerFive(kInterval, seed);
    ASSERT_NE(outcome.steps_to_change, -1) << "no plan change within 100 steps of the slowdown";
    // Three reports confirm the change, then the next evaluation (at most an interval away).
    EXPECT_LE(outcome.steps_to_change, kInterval + 3);
    EXPECT_THAT(outcome.plan_after.reason, HasSubstr("predicted step time"));
    EXPECT_LT(outcome.plan_after.workers[5].batch, 0.6 * outcome.batch_before);
  }
}

TEST(Controller, ASpeedRebalanceCarriesItsPredictedGain) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController();
    FakeCluster cluster(EightMixedWorkers(), 0.01, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 60; ++step) cluster.Step(controller, step);
    cluster.worker(0).slowdown = 3.0;
    // The first speed rebalance (a refinement of the old plan can fall on the slowdown's step).
    bool changed = false;
    for (int64_t step = 60; step < 120 && !changed; ++step) {
      changed = cluster.Step(controller, step) &&
                controller.plan().reason.starts_with("predicted step time");
    }
    ASSERT_TRUE(changed);
    EXPECT_GE(controller.plan().predicted_gain, 0.05) << controller.plan().reason;
    EXPECT_LT(controller.plan().predicted_gain, 1.0);
  }
}

TEST(Controller, AConfirmedSpeedChangeIsEvaluatedAtOnceNotAtTheNextInterval) {
  // An interval far longer than the run: only the confirmed speed change can trigger a re-plan.
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownOutcome outcome = TwofoldSlowdownOfWorkerFive(1000, seed);
    ASSERT_NE(outcome.steps_to_change, -1) << "no plan change within 100 steps of the slowdown";
    // Three reports confirm the change; the decision after them re-plans.
    EXPECT_LE(outcome.steps_to_change, 4);
    EXPECT_LT(outcome.plan_after.workers[5].batch, 0.6 * outcome.batch_before);
  }
}

// A slowdown no plan answers says so, with the gain the answer would have brought against the
// bar it missed: the log then tells a missing rebalance from a missed slowdown.
TEST(Controller, NotesAConfirmedSpeedChangeAndWhyNoPlanAnswersIt) {
  ControllerConfig config = Config(1024);
  config.min_gain = 0.9;                // no plan clears this bar...
  config.refinement_error_ratio = 0.0;  // ...and no refinement replaces the first plan
  Controller controller = MakeController(config);
  FakeCluster cluster(EightMixedWorkers(), 0.02, 1);
  ASSERT_TRUE(cluster.Join(controller).ok());
  for (int64_t step = 0; step < 300; ++step) cluster.Step(controller, step);
  controller.TakeNotes();
  cluster.worker(5).slowdown = 2.0;
  std::string all;
  for (int64_t step = 300; step < 330; ++step) {
    cluster.Step(controller, step);
    for (const std::string& note : controller.TakeNotes()) all += note + "\n";
  }
  EXPECT_THAT(all, HasSubstr("w5: speed change confirmed at step 30"));
  EXPECT_THAT(all, HasSubstr("no plan answers the speed change"));
  EXPECT_THAT(all, HasSubstr("required"));
  EXPECT_THAT(all, HasSubstr("w5 ")) << "the declined plan's moves";
  EXPECT_TRUE(controller.TakeNotes().empty()) << "taken once";
}

TEST(Controller, RefinesAPlanMadeOnLittleEvidenceOnceTheEvidenceHasGrown) {
  // min_gain so high that only refinements can replace the first measured plan.
  ControllerConfig config = Config(2048);
  config.min_gain = 0.5;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController(config);
    FakeCluster cluster(SixteenMixedWorkers(), 0.05, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    std::vector<std::string> reasons;
    for (int64_t step = 0; step < 2000; ++step) {
      if (cluster.Step(controller, step)) reasons.push_back(controller.plan().reason);
    }
    ASSERT_GE(reasons.size(), 2u);
    EXPECT_EQ(reasons[0], "first plan");
    for (std::size_t i = 1; i < reasons.size(); ++i) {
      EXPECT_THAT(reasons[i], HasSubstr("refinement"));
    }
    // Evidence saturates under the fitter's forgetting, so refinements stop.
    EXPECT_LE(reasons.size(), 4u);
    EXPECT_GT(cluster.TrueEfficiency(controller), 0.98);
  }
}

TEST(Controller, KeepsAPlanMadeOnLittleEvidenceWhenRefinementIsOff) {
  ControllerConfig config = Config(2048);
  config.min_gain = 0.5;
  config.refinement_error_ratio = 0.0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController(config);
    FakeCluster cluster(SixteenMixedWorkers(), 0.05, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 2000; ++step) cluster.Step(controller, step);
    EXPECT_EQ(controller.plan_changes(), 1);
  }
}

TEST(Controller, SameProductWorkersStopDitheringOnceTheirPooledShapeIsKnown) {
  std::vector<FakeWorker> workers;
  for (int i = 0; i < 16; ++i) {
    workers.push_back({"w" + std::to_string(i), "NVIDIA-A100-SXM4-80GB", {0.034, 0.0002716}});
  }
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController(Config(4096));
    FakeCluster cluster(workers, 0.05, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    // Alone, each worker's ±10% dither would need its whole 40-step budget at this noise.
    for (int64_t step = 0; step < 15; ++step) cluster.Step(controller, step);
    Result<StepDecision> decision = controller.Decide(15);
    ASSERT_TRUE(decision.ok());
    EXPECT_EQ(decision->batches, PlannedBatches(controller));
  }
}

TEST(Controller, ANewcomerPlansWithTheCostOfItsGpuProductsWorkers) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController();
    FakeCluster cluster(EightMixedWorkers(), 0.05, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 100; ++step) cluster.Step(controller, step);
    ASSERT_TRUE(controller.AddWorker({"new", "NVIDIA-A100-SXM4-80GB"}).ok());
    ASSERT_TRUE(controller.Decide(100).ok());
    const LinearCost truth{0.034, 0.000272};
    const double batch = controller.plan().workers.back().batch;
    // The product's pooled fit from 4 workers x 100 noisy steps: within 2% for
    // most draws, 2.3% at worst over these seeds (it was 2% for the one seed
    // this claim was first checked with).
    EXPECT_NEAR(controller.PlanningCost("new")->Seconds(batch), truth.Seconds(batch),
                0.03 * truth.Seconds(batch));
  }
}

TEST(Controller, ReplansAtOnceWhenAWorkerJoinsOrLeaves) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = MakeController();
    FakeCluster cluster(EightMixedWorkers(), 0.02, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 55; ++step) cluster.Step(controller, step);
    ASSERT_TRUE(controller.AddWorker({"new", "Tesla-T4"}).ok());
    ASSERT_TRUE(controller.RemoveWorker("w0").ok());
    Result<StepDecision> decision = controller.Decide(55);
    ASSERT_TRUE(decision.ok());
    EXPECT_TRUE(decision->plan_changed);
    EXPECT_THAT(controller.plan().reason, HasSubstr("joined: new"));
    EXPECT_THAT(controller.plan().reason, HasSubstr("left: w0"));
    EXPECT_EQ(controller.plan().workers.size(), 8u);
    // The newcomer's prior comes from the measured workers scaled by catalog speed.
    const LinearCost prior = *controller.FittedCost("new");
    EXPECT_GT(prior.seconds_per_sample, 0.0015);
    EXPECT_LT(prior.seconds_per_sample, 0.003);
  }
}

TEST(Controller, ReplansAtOnceBelowTheBatchThatRanOutOfMemory) {
  Controller controller = MakeController();
  ASSERT_TRUE(controller.AddWorker({"a", "NVIDIA-A100-SXM4-80GB"}).ok());
  ASSERT_TRUE(controller.AddWorker({"b", "Tesla-V100"}).ok());
  ASSERT_TRUE(controller.Decide(0).ok());
  const int batch = controller.plan().workers[0].batch;
  StepReport out_of_memory = Report("a");
  out_of_memory.local_batch = batch;
  out_of_memory.out_of_memory = true;
  ASSERT_TRUE(controller.Observe(out_of_memory).ok());
  Result<StepDecision> decision = controller.Decide(1);
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->plan_changed);
  EXPECT_THAT(controller.plan().reason, HasSubstr("out of memory: a"));
  EXPECT_LT(controller.plan().workers[0].micro_batch, batch);
}

TEST(Controller, ANewGlobalBatchIsReSplitAtTheNextDecisionKeepingTheModels) {
  Controller controller = MakeController(/*interval_steps=*/1000);
  FakeCluster cluster(EightMixedWorkers(), 0.02, 5);
  ASSERT_TRUE(cluster.Join(controller).ok());
  for (int64_t step = 0; step < 60; ++step) cluster.Step(controller, step);
  const LinearCost fitted_before = *controller.FittedCost("w0");
  ASSERT_TRUE(controller.Retune(2048, PolicyKind::kOptimal, 0.05, 1000).ok());
  Result<StepDecision> decision = controller.Decide(60);
  ASSERT_TRUE(decision.ok());
  EXPECT_TRUE(decision->plan_changed) << "without waiting for the 1000-step interval";
  EXPECT_THAT(controller.plan().reason, HasSubstr("global batch 1024 -> 2048"));
  EXPECT_EQ(controller.plan().global_batch, 2048);
  const std::vector<int> planned = PlannedBatches(controller);
  EXPECT_EQ(std::accumulate(planned.begin(), planned.end(), 0), 2048);
  // The measured model survives (a reset would fall back to the catalog prior).
  EXPECT_NEAR(controller.FittedCost("w0")->seconds_per_sample, fitted_before.seconds_per_sample,
              0.001 * fitted_before.seconds_per_sample);
  // Tuning alone (min_gain, interval) does not force a plan.
  ASSERT_TRUE(controller.Retune(2048, PolicyKind::kOptimal, 0.2, 500).ok());
  EXPECT_FALSE(controller.Decide(61)->plan_changed);
  EXPECT_EQ(controller.Retune(0, PolicyKind::kOptimal, 0.2, 500).error().field, "global_batch");
}

TEST(Controller, DithersUntilIdentifiedThenRunsThePlanAsIs) {
  Controller controller = MakeController();
  FakeCluster cluster(EightMixedWorkers(), 0.0, 4);
  ASSERT_TRUE(cluster.Join(controller).ok());
  Result<StepDecision> first = controller.Decide(0);
  ASSERT_TRUE(first.ok());
  EXPECT_NE(first->batches, PlannedBatches(controller));
  for (int64_t step = 1; step < 200; ++step) cluster.Step(controller, step);
  Result<StepDecision> later = controller.Decide(200);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->batches, PlannedBatches(controller));
}

TEST(Controller, ExplainsBadInputs) {
  EXPECT_EQ(Controller::Create(Config(0)).error().field, "global_batch");
  ControllerConfig negative_gain = Config(8);
  negative_gain.min_gain = -0.1;
  EXPECT_EQ(Controller::Create(negative_gain).error().field, "min_gain");
  Controller controller = MakeController();
  EXPECT_EQ(controller.Decide(0).error().code, ErrorCode::kFailedPrecondition);
  EXPECT_EQ(controller.Observe(Report("ghost")).error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(controller.AddWorker({"a", "Tesla-T4"}).ok());
  EXPECT_EQ(controller.AddWorker({"a", "Tesla-T4"}).error().code, ErrorCode::kAlreadyExists);
  StepReport negative_time = Report("a");
  negative_time.compute_seconds = -1;
  EXPECT_EQ(controller.Observe(negative_time).error().field, "compute_seconds");
  EXPECT_EQ(controller.RemoveWorker("ghost").error().code, ErrorCode::kNotFound);
}

// Below some size a device runs a step slower than a bigger one (CPU threads or GPU SMs left
// idle), which the line c(b) = a + k·b cannot say. A slow worker that the line would give a
// batch or two gets no less than its minimum useful batch once its reports show the small
// batch slower than one twice as big; with a healthy curve the same plan gives it less.
std::vector<int> PlanAfterSlowWorkerReports(double seconds_at_batch_2) {
  Controller controller = MakeController(Config(64));
  EXPECT_TRUE(controller.AddWorker({"fast", "NVIDIA-A100-SXM4-80GB"}).ok());
  EXPECT_TRUE(controller.AddWorker({"slow", "Tesla-T4"}).ok());
  EXPECT_TRUE(controller.Decide(0).ok());
  int64_t step = 0;
  auto report = [&](const std::string& id, int batch, double seconds) {
    StepReport observation = Report(id);
    observation.step = step;
    observation.local_batch = batch;
    observation.compute_seconds = seconds;
    observation.comm_seconds = 0.01;
    EXPECT_TRUE(controller.Observe(observation).ok());
  };
  // The slow worker, measured at 8 and then at 2 samples, as plans and dither moved it; the
  // fast one near its share. Fitted on these, the line puts the slow worker at a batch or two.
  for (int batch : {8, 8, 8, 2, 2, 2}) {
    ++step;
    report("slow", batch, batch == 8 ? 0.100 : seconds_at_batch_2);
    report("fast", 64 - batch, 0.01 + 0.0004 * (64 - batch));
  }
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(controller.Decide(++step).ok());
    report("slow", controller.plan().workers[1].batch, 0.1);
    report("fast", controller.plan().workers[0].batch, 0.03);
  }
  return PlannedBatches(controller);
}

TEST(Controller, NeverPlansABatchSlowerThanABiggerOneOnceReportsShowIt) {
  const std::vector<int> healthy = PlanAfterSlowWorkerReports(/*seconds_at_batch_2=*/0.070);
  const std::vector<int> pathological = PlanAfterSlowWorkerReports(/*seconds_at_batch_2=*/0.150);
  EXPECT_LT(healthy[1], 3) << "with a healthy curve the slow worker gets a batch or two";
  EXPECT_GE(pathological[1], 3) << "batch 2 took longer than batch 8: never plan it again";
}

// Issue 25's scenario against testing::ClusterModel: one fast worker and two at half its
// speed, all flat below 16 samples, 3% timing noise plus contention the emulated slowdown does
// not scale, and the coordinator's apply lead of 3 steps. The fast worker is slowed 6x at
// step 200 and recovers at step 260, where the split the slowdown led to is judged. Its optimal
// batch falls from 192 to about 51, into sizes it never ran.
constexpr int64_t kSlowdownStep = 200;
constexpr int64_t kLiftStep = 260;

struct SlowdownRun {
  int rebalances_in_30_steps = 0;   // plan changes in [slowdown, slowdown + 30)
  int slowed_batch_rises = 0;       // times its running or planned batch went up
  int slowed_optimal_batch = 0;     // its batch in the true optimum while slowed
  double efficiency_at_lift = 0.0;  // true η of the running split where the slowdown ends
  double efficiency_20_steps_after_lift = 0.0;
  std::vector<std::string> reasons;  // every plan change after the slowdown, for failures
  // Each plan change during the slowdown that moved the slowed worker: (step, from, to).
  struct Move {
    int64_t step;
    int from;
    int to;
    std::string reason;
  };
  std::vector<Move> slowed_moves;
};

SlowdownRun SixfoldSlowdownOfTheFastestWorker(uint64_t seed) {
  ControllerConfig config = Config(384);
  config.seed = seed;
  Controller controller = MakeController(config);
  testing::ClusterModel cluster({{"fast", "NVIDIA-A100-SXM4-80GB", 0.002, 0.0004, 16},
                                 {"half1", "Tesla-V100-SXM2-16GB", 0.002, 0.0008, 16},
                                 {"half2", "Tesla-V100-SXM2-16GB", 0.002, 0.0008, 16}},
                                {.relative = 0.03, .contention_seconds = 0.0015}, 3, seed);
  EXPECT_TRUE(cluster.Join(controller).ok());
  SlowdownRun run;
  for (int64_t step = 0; step < kSlowdownStep; ++step) cluster.Step(controller, step);
  cluster.worker(0).slowdown = 6.0;
  run.slowed_optimal_batch = cluster.OptimalBatches(384)[0];
  int running_before = cluster.running()[0];
  int planned_before = controller.plan().workers[0].batch;
  for (int64_t step = kSlowdownStep; step < kLiftStep; ++step) {
    const bool changed = cluster.Step(controller, step);
    if (changed) {
      run.reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
      if (step < kSlowdownStep + 30) ++run.rebalances_in_30_steps;
    }
    const int running = cluster.running()[0];
    const int planned = controller.plan().workers[0].batch;
    if (changed && planned != planned_before)
      run.slowed_moves.push_back({step, planned_before, planned, controller.plan().reason});
    run.slowed_batch_rises += (running > running_before) + (planned > planned_before);
    running_before = running;
    planned_before = planned;
  }
  run.efficiency_at_lift = cluster.TrueEfficiency();
  cluster.worker(0).slowdown = 1.0;
  for (int64_t step = kLiftStep; step < kLiftStep + 20; ++step) {
    if (cluster.Step(controller, step)) {
      run.reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
    }
  }
  run.efficiency_20_steps_after_lift = cluster.TrueEfficiency();
  return run;
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string joined;
  for (const std::string& line : lines) joined += "\n  " + line;
  return joined;
}

TEST(Controller, AfterASixfoldSlowdownOfTheFastestWorkerRebalancesAtMostTwiceIn30Steps) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownRun run = SixfoldSlowdownOfTheFastestWorker(seed);
    EXPECT_GE(run.rebalances_in_30_steps, 1) << Joined(run.reasons);
    EXPECT_LE(run.rebalances_in_30_steps, 2) << Joined(run.reasons);
  }
}

TEST(Controller, AfterASixfoldSlowdownTheSlowedWorkersBatchNeverRises) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownRun run = SixfoldSlowdownOfTheFastestWorker(seed);
    EXPECT_EQ(run.slowed_batch_rises, 0) << Joined(run.reasons);
  }
}

TEST(Controller, AfterASixfoldSlowdownTheSplitEndsWithin5PercentOfTheTrueOptimum) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownRun run = SixfoldSlowdownOfTheFastestWorker(seed);
    EXPECT_GE(run.efficiency_at_lift, 0.95) << Joined(run.reasons);
  }
}

// The controller for global batch `global_batch` with dither phases from `seed`.
Controller SeededController(int global_batch, uint64_t seed) {
  ControllerConfig config = Config(global_batch);
  config.seed = seed;
  return MakeController(config);
}

// The demo's cluster (scripts/demo: an A100, a V100 2x and a T4 4x slower) under its timing
// noise, with the coordinator's apply lead.
testing::ClusterModel DemoClusterUnderItsNoise(uint64_t seed) {
  return testing::ClusterModel({{"a100", "A100-SXM4-40GB", 0.01, 0.0012},
                                {"v100", "V100-SXM2-16GB", 0.02, 0.0024},
                                {"t4", "Tesla-T4", 0.04, 0.0048}},
                               {.relative = 0.10, .contention_seconds = 0.005}, 3, seed);
}

// What the controller made of the demo's cluster under its noise when worker 0 (the A100) became
// `factor` times slower at step 160: the reasons of the plans from then to `end`, how many
// raised worker 0's batch, and the true efficiency at the end. `each_step` runs before every
// step from 160 (to change the cluster as the answer goes on).
struct SlowdownAnswer {
  bool joined = false;
  std::vector<std::string> reasons;
  int rises = 0;
  double end_efficiency = 0.0;
};
SlowdownAnswer AnswerDemoSlowdown(
    uint64_t seed, double factor, int64_t end,
    const std::function<void(testing::ClusterModel&, int64_t)>& each_step = {}) {
  SlowdownAnswer answer;
  Controller controller = SeededController(96, seed);
  testing::ClusterModel cluster = DemoClusterUnderItsNoise(seed);
  answer.joined = cluster.Join(controller).ok();
  if (!answer.joined) return answer;
  constexpr int64_t kStep = 160;
  for (int64_t step = 0; step < kStep; ++step) cluster.Step(controller, step);
  cluster.worker(0).slowdown = factor;
  int planned_before = controller.plan().workers[0].batch;
  for (int64_t step = kStep; step < end; ++step) {
    if (each_step) each_step(cluster, step);
    if (!cluster.Step(controller, step)) continue;
    answer.reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
    const int planned = controller.plan().workers[0].batch;
    answer.rises += planned > planned_before;
    planned_before = planned;
  }
  answer.end_efficiency = cluster.TrueEfficiency();
  return answer;
}

// The demo's event under its timing noise: three CPU trainers sharing two cores scatter by 10%
// and more, and there a 6x slowdown drew a third and a fourth plan, one moving the slowed node
// back up (18 -> 21). Every plan for the rest of the slowdown counts, not only the first 30
// steps. A third plan may still come where the one finishing the first move stopped far short
// on a noisy landing (seed 42: 19 against a true optimum of 14, for a 16% gain beyond the
// 15.6% noise band), so: never a rise, never a fourth plan, a third on at most 2 seeds of 50.
TEST(Controller, UnderTenPercentTimingNoiseASixfoldSlowdownGetsAtMostTwoPlansAndNoRise) {
  int third_plans = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownAnswer answer = AnswerDemoSlowdown(seed, 6.0, 300);
    ASSERT_TRUE(answer.joined);
    EXPECT_GE(answer.reasons.size(), 1u);
    EXPECT_LE(answer.reasons.size(), 3u) << Joined(answer.reasons);
    third_plans += answer.reasons.size() > 2;
    EXPECT_EQ(answer.rises, 0) << Joined(answer.reasons);
    // The price of not chasing that noise: the split may end further from the optimum than
    // under 3% noise (AfterASixfoldSlowdownTheSplitEndsWithin5PercentOfTheTrueOptimum); over
    // these seeds 0.82 at worst, 0.95 in the median.
    EXPECT_GE(answer.end_efficiency, 0.8) << Joined(answer.reasons);
  }
  EXPECT_LE(third_plans, 2);
}

// On shared cores a trainer that slows down (an emulated slowdown sleeps) frees a core, and
// another trainer speeds up until the answer cuts the slowed one's batch and its sleep; that
// speed-up is confirmed, answered, and ends. trainer_bench saw exactly this (2026-11-29): a 2x
// slowdown of trainer-0 answered 61 -> 43, trainer-1's speed-up (x0.83) confirmed the next step
// and answered (43 -> 39), its end answered too, and that plan gave trainer-0 a sample back
// (39 -> 40). A worker answered for its own slowdown does not take samples back on another
// worker's change while it dwells: only its own speed-up, or a later plan, can raise it.
TEST(Controller, AnotherWorkersBriefSpeedUpRightAfterASlowdownNeverRaisesTheSlowedBatch) {
  int rising_seeds = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownAnswer answer =
        AnswerDemoSlowdown(seed, 2.0, 190, [](testing::ClusterModel& cluster, int64_t step) {
          // The core worker 0 frees while it sleeps speeds worker 1 up, until its answer lands.
          if (step == 161) cluster.worker(1).slowdown = 0.83;
          if (step == 169) cluster.worker(1).slowdown = 1.0;
        });
    ASSERT_TRUE(answer.joined);
    EXPECT_GE(answer.reasons.size(), 1u);
    rising_seeds += answer.rises > 0;
    EXPECT_EQ(answer.rises, 0) << Joined(answer.reasons);
  }
  EXPECT_EQ(rising_seeds, 0);
}

// A burst of contention long enough to be confirmed as a speed change and answered (the
// fastest worker 2x slower for 5 steps, under 10% noise) is undone once it ends: the landing of
// the answer measures the worker's speed again, and the split goes back. Before, the speed the
// burst implied stayed (no size measured before the burst within 10% of the landing to compare
// with), the gain of going back fell under the noise band, and the split stayed about 15% slow
// to the end, as a local run of the demo's job did before its slowdown.
TEST(Controller, ABurstOfContentionAnsweredAsASlowdownIsUndoneOnceItEnds) {
  std::vector<double> ends;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = SeededController(96, seed);
    testing::ClusterModel cluster = DemoClusterUnderItsNoise(seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 100; ++step) cluster.Step(controller, step);
    cluster.worker(0).slowdown = 2.0;
    std::vector<std::string> reasons;
    for (int64_t step = 100; step < 105; ++step) {
      if (cluster.Step(controller, step)) reasons.push_back(controller.plan().reason);
    }
    cluster.worker(0).slowdown = 1.0;
    for (int64_t step = 105; step < 160; ++step) {
      if (cluster.Step(controller, step)) reasons.push_back(controller.plan().reason);
    }
    ends.push_back(cluster.TrueEfficiency());
  }
  // In the median within the noise band of the optimum (10% timing noise: see the sixfold test
  // above), and rarely far from it: a burst counts as ended only once the speed is back within
  // 15% of its value before, and on 2 of these seeds the landing read further off than that.
  // Over these seeds 0.74 at worst and 0.97 in the median; without the landing measuring the
  // speed, 0.71 at worst and 0.75 in the median, 49 of 50 under 0.8.
  EXPECT_LE(std::count_if(ends.begin(), ends.end(), [](double end) { return end < 0.8; }), 2);
  std::nth_element(ends.begin(), ends.begin() + ends.size() / 2, ends.end());
  EXPECT_GE(ends[ends.size() / 2], 0.93);
}

// A worker put at batch 1 on warm-up timings (20x slow for its first steps, as the e2e Python
// job's first steps are) grows back once it runs at speed: planned at its time per sample at
// batch 1, nearly all fixed cost, it never would (the Python job's V100 stayed at 1).
TEST(Controller, AWorkerPutAtBatchOneByWarmUpTimingsGrowsBackOnceItRunsAtSpeed) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = SeededController(96, seed);
    testing::ClusterModel cluster(
        {{"a100", "A100-SXM4-40GB", 0.02, 0.001}, {"v100", "V100-SXM2-16GB", 0.04, 0.002}},
        {.relative = 0.03}, 3, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    cluster.worker(1).slowdown = 20.0;
    std::vector<std::string> reasons;
    int lowest = 96;
    for (int64_t step = 0; step < 40; ++step) {
      if (cluster.Step(controller, step)) reasons.push_back(controller.plan().reason);
      lowest = std::min(lowest, controller.plan().workers[1].batch);
    }
    cluster.worker(1).slowdown = 1.0;
    for (int64_t step = 40; step < 100; ++step) {
      if (cluster.Step(controller, step)) reasons.push_back(controller.plan().reason);
    }
    const int optimal = cluster.OptimalBatches(96)[1];
    EXPECT_GE(controller.plan().workers[1].batch, optimal / 2)
        << "lowest " << lowest << ", optimal " << optimal << Joined(reasons);
  }
}

// A trainer's start-up slows its first steps by a wait no batch size scales (its data pipeline
// filling its prefetch queue, the three trainers of the demo starting on two cores): the sizes
// run then, and the line fitted to them, said the V100 had a fixed cost of 0.13 s, and once its
// later times were far off that line they never refitted it. The demo ran it at 9 of its 27
// samples for 270 steps. Here the demo's cluster starts with such a wait fading over 30 steps;
// 100 steps after it ended, the split is near the optimum on most seeds. Before the stale
// evidence was retired, 35 of these 50 seeds were under 0.9 (0.89 in the median).
TEST(Controller, WhatATrainersStartUpSlowedIsRemeasuredOnceItEnds) {
  std::vector<double> ends;
  int retirements = 0;
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    Controller controller = SeededController(96, seed);
    testing::ClusterModel cluster(
        {{.id = "a100",
          .gpu = "A100-SXM4-40GB",
          .fixed_seconds = 0.01,
          .seconds_per_sample = 0.0012,
          .startup_seconds = 0.05},
         {.id = "v100",
          .gpu = "V100-SXM2-16GB",
          .fixed_seconds = 0.02,
          .seconds_per_sample = 0.0024,
          .startup_seconds = 0.15},
         {.id = "t4",
          .gpu = "Tesla-T4",
          .fixed_seconds = 0.04,
          .seconds_per_sample = 0.0048,
          .startup_seconds = 0.10}},
        {.relative = 0.10, .contention_seconds = 0.005, .startup_steps = 30}, 3, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    for (int64_t step = 0; step < 130; ++step) {
      cluster.Step(controller, step);
      // The log says what was retired, and why plans rest on less than before.
      for (const std::string& note : controller.TakeNotes()) {
        retirements += note.find("evidence older than 50 reports retired") != std::string::npos;
      }
    }
    ends.push_back(cluster.TrueEfficiency());
  }
  EXPECT_GE(retirements, 50);
  // Over these seeds 0.81 at worst, 0.96 in the median, 10 under 0.9: where the start-up put a
  // worker at one size only, nothing measured since says what the others take.
  EXPECT_LE(std::count_if(ends.begin(), ends.end(), [](double end) { return end < 0.9; }), 12);
  std::nth_element(ends.begin(), ends.begin() + ends.size() / 2, ends.end());
  EXPECT_GE(ends[ends.size() / 2], 0.94);
}

// A slowdown right after a plan moved the other workers (who then dwell) is answered at once:
// the dwell does not hold the workers that must take the slowed one's samples. (In the demo,
// holding them made the answer to a 6x slowdown wait 67 steps.)
TEST(Controller, ASlowdownRightAfterAMoveIsAnsweredWithoutWaitingOutTheDwell) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ControllerConfig config = Config(384);
    config.seed = seed;
    config.interval_steps = 50;
    Controller controller = MakeController(config);
    testing::ClusterModel cluster({{"fast", "NVIDIA-A100-SXM4-80GB", 0.002, 0.0004, 16},
                                   {"half1", "Tesla-V100-SXM2-16GB", 0.002, 0.0008, 16},
                                   {"half2", "Tesla-V100-SXM2-16GB", 0.002, 0.0008, 16}},
                                  {.relative = 0.03, .contention_seconds = 0.0015}, 3, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    int64_t step = 0;
    for (; step < kSlowdownStep; ++step) cluster.Step(controller, step);
    cluster.worker(1).slowdown = 2.0;  // the others take some of its samples, then dwell
    std::vector<std::string> reasons;
    bool moved = false;
    for (const int64_t end = step + 40; step < end && !moved; ++step) {
      moved = cluster.Step(controller, step) &&
              controller.plan().reason.find("predicted step time") != std::string::npos;
    }
    ASSERT_TRUE(moved) << "no answer to the first slowdown";
    for (const int64_t end = step + 5; step < end; ++step) cluster.Step(controller, step);
    cluster.worker(0).slowdown = 6.0;
    const int before = controller.plan().workers[0].batch;
    const int64_t slowed_at = step;
    int64_t answered = -1;
    for (const int64_t end = step + 15; step < end && answered < 0; ++step) {
      if (cluster.Step(controller, step)) {
        reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
        if (controller.plan().workers[0].batch < before) answered = step;
      }
    }
    EXPECT_GE(answered, 0) << "the 6x slowdown at step " << slowed_at
                           << " was not answered within 15 steps" << Joined(reasons);
  }
}

TEST(Controller, NoPlanMovesTheSlowedWorkerPastItsTrueOptimumAndEachMoveIsEarned) {
  // Below its batch at the slowdown the slowed worker never ran, so it is planned at its current
  // time per sample there, which a step's fixed cost and the knee only make dearer: no plan
  // takes it below its true optimum (10% for timing noise and contention), and the move goes
  // the rest of the way once the size it reached is measured. Dwell: another move of it waits
  // interval_steps (10), unless it goes on from such a move once its landing is measured
  // (3 reports after the 3-step apply lead).
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownRun run = SixfoldSlowdownOfTheFastestWorker(seed);
    ASSERT_FALSE(run.slowed_moves.empty());
    for (std::size_t i = 0; i < run.slowed_moves.size(); ++i) {
      const SlowdownRun::Move& move = run.slowed_moves[i];
      EXPECT_GE(move.to, 0.9 * run.slowed_optimal_batch)
          << "optimum " << run.slowed_optimal_batch << Joined(run.reasons);
      if (i == 0) continue;
      const SlowdownRun::Move& previous = run.slowed_moves[i - 1];
      const bool goes_on = previous.reason.find("current time per sample") != std::string::npos;
      EXPECT_GE(move.step - previous.step, goes_on ? 5 : 10) << Joined(run.reasons);
    }
    EXPECT_THAT(run.reasons.front(), HasSubstr("moves: fast"));
  }
}

// A slowdown that takes a worker's optimum down more than 4x, into sizes it never ran (little
// fixed cost: time per sample barely changes with the batch) is answered in two plans: the
// first, at the worker's current time per sample, lands short of the optimum, and the second,
// once that landing is measured, goes the rest of the way on the slope between the two sizes.
// (A x2/÷2 trust region needs three.)
TEST(Controller, ASlowdownThatMovesAWorkerMoreThanFourfoldIsAnsweredInTwoPlans) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = SeededController(384, seed);
    testing::ClusterModel cluster({{"fast", "NVIDIA-A100-SXM4-80GB", 0.0005, 0.0004, 1},
                                   {"half1", "Tesla-V100-SXM2-16GB", 0.0005, 0.0008, 1},
                                   {"half2", "Tesla-V100-SXM2-16GB", 0.0005, 0.0008, 1}},
                                  {.relative = 0.03, .contention_seconds = 0.0005}, 3, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    int64_t step = 0;
    for (; step < kSlowdownStep; ++step) cluster.Step(controller, step);
    const int before = controller.plan().workers[0].batch;
    cluster.worker(0).slowdown = 10.0;
    const int optimum = cluster.OptimalBatches(384)[0];
    ASSERT_GT(before, 4 * optimum) << "the scenario must move the worker more than 4x";
    std::vector<std::string> reasons;
    for (const int64_t end = step + 30; step < end; ++step) {
      if (cluster.Step(controller, step)) {
        reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
      }
    }
    EXPECT_LE(reasons.size(), 2u) << Joined(reasons);
    // Settled: a split within min_gain (5%) of what the model can find is kept, by design, and
    // the true optimum ignores the contention the workers wait for; hence 0.94.
    EXPECT_GE(cluster.TrueEfficiency(), 0.94) << Joined(reasons);
  }
}

// The e2e Python job's shape (below), 100 steps in: an A100, a V100 and a T4 whose steps have
// a fixed cost worth 150 samples, 3% timing noise, a little contention and an apply lead of 3.
struct PythonJobShape {
  explicit PythonJobShape(uint64_t seed)
      : controller(SeededController(96, seed)),
        cluster({{"a100", "A100-SXM4-40GB", 0.03, 0.0002},
                 {"v100", "V100-SXM2-16GB", 0.06, 0.0004},
                 {"t4", "Tesla-T4", 0.12, 0.0008}},
                {.relative = 0.03, .contention_seconds = 0.001}, 3, seed) {
    EXPECT_TRUE(cluster.Join(controller).ok());
    for (; step < 100; ++step) cluster.Step(controller, step);
  }
  Controller controller;
  testing::ClusterModel cluster;
  int64_t step = 0;
};

// The e2e Python job's shape: a step's fixed cost (Python's per-step overhead) worth 150
// samples, so the V100 and the T4 sit at batch 1 beside the A100, measured nowhere else. Slowed
// 8x, the A100 should hand nearly all its samples to the V100, far beyond any size it ran. Each
// far grower was planned on its model up to 2·current + 2 first (measured there before the
// rest of the way). In the e2e case that first leg (1 -> 4) predicted a gain under min_gain
// (5%), so no plan came at all (no rebalance in 120 s). Here, where the V100's and T4's legs
// together just clear it (5.9% on seed 0), 1 -> 4 -> 10 -> 22 -> 66 took 30 steps and ended at
// 0.68-0.76 of the optimum. A far grower now goes as far as a slope twice its model's stays
// within the plan's step time (seed 0: V100 1 -> 74 -> 94 in two plans).
TEST(Controller, AWorkerAtBatchOneTakesTheSlowedWorkersSamplesEvenThoughItNeverRanThatFar) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PythonJobShape job(seed);
    auto& [controller, cluster, step] = job;
    EXPECT_LE(controller.plan().workers[1].batch, 4)
        << "the scenario needs the V100 at a few samples";
    const int before = controller.plan().workers[0].batch;
    int slowed_batch = before;
    cluster.worker(0).slowdown = 8.0;
    std::vector<std::string> reasons;
    int64_t answered = -1;
    for (const int64_t end = step + 30; step < end; ++step) {
      if (!cluster.Step(controller, step)) continue;
      reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
      const int planned = controller.plan().workers[0].batch;
      if (answered < 0 && planned < before) {
        answered = step;
        EXPECT_GE(controller.plan().predicted_gain, 0.05) << Joined(reasons);
      }
      EXPECT_LE(planned, slowed_batch) << "the slowed A100's batch rose" << Joined(reasons);
      slowed_batch = planned;
    }
    EXPECT_GE(answered, 0) << "no plan took samples off the slowed A100" << Joined(reasons);
    EXPECT_GE(cluster.TrueEfficiency(), 0.9) << Joined(reasons);
  }
}

// The e2e Python job's slowed A100 read x3.4 of its true x8 until the plan answering the change
// landed (on shared cores its emulated speed followed the other ranks' batches), so batch 27,
// measured after the landing, looked slower than 84, measured before it, and a forced plan
// raised it again (84 -> 27 -> 84). Sizes measured before the worker's speed rebalance landed
// are not compared with those after: the speed between them may not be the same.
TEST(Controller, ASpeedStillFallingWhenTheAnswerLandsDoesNotMakeTheNewBatchLookPathological) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    PythonJobShape job(seed);
    auto& [controller, cluster, step] = job;
    const int before = cluster.running()[0];
    int slowed_batch = controller.plan().workers[0].batch;
    cluster.worker(0).slowdown = 3.4;
    std::vector<std::string> reasons;
    bool landed = false;
    for (const int64_t end = step + 40; step < end; ++step) {
      if (!landed && cluster.running()[0] < before / 2) {
        landed = true;
        cluster.worker(0).slowdown = 8.0;
      }
      if (!cluster.Step(controller, step)) continue;
      reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
      const int planned = controller.plan().workers[0].batch;
      EXPECT_LE(planned, slowed_batch) << "the slowed A100's batch rose" << Joined(reasons);
      slowed_batch = planned;
    }
    EXPECT_TRUE(landed) << "the scenario needs the A100 moved off most of its batch"
                        << Joined(reasons);
  }
}

TEST(Controller, AfterTheSlowdownIsLiftedTheSplitRecoversWithin20Steps) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const SlowdownRun run = SixfoldSlowdownOfTheFastestWorker(seed);
    EXPECT_GE(run.efficiency_20_steps_after_lift, 0.95) << Joined(run.reasons);
  }
}

// A slowdown that hits on the first step of a move to a smaller size, where this regime only
// measured bigger ones: no history there to contradict, but a step at a smaller batch taking
// several times a bigger one's time is a change of speed, not the device's shape. Before, the
// slowed times became that size's history, the nondecreasing planning curve hid them, and no
// plan ever followed (the Python job's rank c held 23 samples 6x slower; issue 25). Three equal
// workers, B = 96 (that job's shape): c slowed 2x is answered in two legs, and on the first step
// of the second leg's size it slows 6x more.
TEST(Controller, ASlowdownOnTheFirstStepOfASmallerSizeIsStillAnswered) {
  for (uint64_t seed = 0; seed < kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Controller controller = SeededController(96, seed);
    testing::ClusterModel cluster(
        {{"a", "", 0.01, 0.0005}, {"b", "", 0.01, 0.0005}, {"c", "", 0.01, 0.0005}},
        {.relative = 0.05, .contention_seconds = 0.001}, 3, seed);
    ASSERT_TRUE(cluster.Join(controller).ok());
    int64_t step = 0;
    for (; step < 100; ++step) cluster.Step(controller, step);
    cluster.worker(2).slowdown = 2.0;
    std::vector<std::string> reasons;
    int moves_of_c = 0;
    int previous = cluster.running()[2];
    int held = 0;
    int64_t slowed_at = -1;
    int64_t answered_at = -1;
    int plans_after = 0;
    for (const int64_t end = step + 60; step < end; ++step) {
      const bool changed = cluster.Step(controller, step);
      if (changed) reasons.push_back(std::to_string(step) + ": " + controller.plan().reason);
      // Three slowed reports confirm the change, so a plan decided before the third (one
      // finishing the 2x answer) answers the earlier change, not this one.
      if (changed && slowed_at >= 0 && step >= slowed_at + 2) ++plans_after;
      const int now = cluster.running()[2];
      if (now != previous && ++moves_of_c == 2) {
        cluster.worker(2).slowdown = 12.0;  // from the next step: its second at this size
        slowed_at = step + 1;
        held = now;
        reasons.push_back("c runs " + std::to_string(now) + ", 6x slower from step " +
                          std::to_string(slowed_at));
      } else if (slowed_at >= 0 && now != previous) {
        EXPECT_LT(now, previous) << "the slowed worker's batch rose" << Joined(reasons);
      }
      if (slowed_at >= 0 && answered_at < 0 && 2 * now <= held) answered_at = step;
      previous = now;
    }
    ASSERT_GE(slowed_at, 0) << "the 2x slowdown was not answered in two legs" << Joined(reasons);
    ASSERT_GE(answered_at, 0) << "c still holds " << cluster.running()[2] << " of " << held
                              << Joined(reasons);
    // Confirmed on 3 reports, then the plan lead (3 steps).
    EXPECT_LE(answered_at - slowed_at, 10) << Joined(reasons);
    EXPECT_LE(plans_after, 2) << Joined(reasons);
  }
}

}  // namespace
}  // namespace fulcrum::balancer
