// The simulator against the real balancer on a device with a minimum efficient batch: the
// line c(b) = a + k·b puts the slow workers near batch 7, where a step takes longer than at
// 16. The balancer learns it from the reports and stops handing such batches out.
#include "bench/sim/cluster_simulator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace fulcrum::sim {
namespace {

Scenario LoadBundled(const std::string& name) {
  const char* root = std::getenv("FULCRUM_SOURCE_DIR");
  Result<Scenario> scenario =
      LoadScenario(std::string(root != nullptr ? root : ".") + "/bench/scenarios/" + name);
  EXPECT_TRUE(scenario.ok()) << scenario.error().ToString();
  return *scenario;
}

Scenario SmallBatchScenario() {
  return LoadBundled("small_batch.yaml");
}

TEST(ClusterSimulator, NoPolicyKeepsGivingABatchSlowerThanABiggerOne) {
  const Scenario scenario = SmallBatchScenario();
  for (const balancer::PolicyKind policy :
       {balancer::PolicyKind::kOptimal, balancer::PolicyKind::kProportional}) {
    const Result<PolicyRun> run = RunScenario(scenario, policy);
    ASSERT_TRUE(run.ok()) << run.error().ToString();
    // It takes a plan that gives a pathological batch, and three reports of it, to learn;
    // after that none, for the remaining ~380 steps.
    EXPECT_LE(run->pathological_steps, 10) << balancer::ToString(policy);
    EXPECT_LT(run->last_pathological_step, 30) << balancer::ToString(policy);
  }
}

TEST(ClusterSimulator, ALinearDeviceIsNeverCountedPathological) {
  Scenario scenario = SmallBatchScenario();
  scenario.profiles.at("P100").min_efficient_batch = 0;
  const Result<PolicyRun> run = RunScenario(scenario, balancer::PolicyKind::kOptimal);
  ASSERT_TRUE(run.ok()) << run.error().ToString();
  EXPECT_EQ(run->pathological_steps, 0);
  EXPECT_EQ(run->last_pathological_step, -1);
}

// Issue 25's goals on the demo's event with what made the balancer thrash there (contention a
// slowdown does not scale, the apply lead): over 30 seeds of timing noise, a 6x slowdown of the
// fastest worker, then its end, are each answered by at most two plans, within 10 steps (3
// reports confirm and size the slowdown, the 3-step lead, 3 reports of the landing, the lead
// again), and the slowed worker's batch never goes back up while it is slow. Some seeds' splits
// hover at the 0.95 the reaction counts from (bench/sim/event_sweep.py), so most, not all, must
// get there for good.
TEST(ClusterSimulator, ASixfoldSlowdownAndItsEndAreEachAnsweredByAtMostTwoPlansWithin10Steps) {
  constexpr int kSeeds = 30;
  const Scenario scenario = LoadBundled("slowdown6x.yaml");
  int reached[3] = {0, 0, 0};
  for (int seed = 1; seed <= kSeeds; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Scenario seeded = scenario;
    seeded.seed = static_cast<uint64_t>(seed);
    const Result<PolicyRun> run = RunScenario(seeded, balancer::PolicyKind::kOptimal);
    ASSERT_TRUE(run.ok()) << run.error().ToString();
    ASSERT_EQ(run->events.size(), 3u);  // the start, the slowdown, its end
    for (std::size_t i = 1; i < run->events.size(); ++i) {
      const EventOutcome& event = run->events[i];
      SCOPED_TRACE(event.description);
      EXPECT_GE(event.plan_changes, 1);
      EXPECT_LE(event.plan_changes, 2);
      EXPECT_EQ(event.slowed_batch_rises, 0);
      if (event.reaction_steps) {
        EXPECT_LE(*event.reaction_steps, 10);
        ++reached[i];
      }
    }
    EXPECT_GE(run->efficiency, 0.92);
  }
  EXPECT_GE(reached[1], kSeeds * 8 / 10);
  EXPECT_GE(reached[2], kSeeds * 8 / 10);
}

TEST(ClusterSimulator, RefusesAnApplyLeadWithMembershipEvents) {
  const Result<Scenario> parsed = ParseScenario(R"(
name: lead
global_batch: 64
steps: 10
balancer: {apply_lead_steps: 3}
profiles: {G: {product: Tesla-T4, fixed_seconds: 0.01, seconds_per_sample: 0.001, memory_gib: 16, source: test}}
workers: [{profile: G, count: 2}]
events: [{step: 5, kind: leave, worker: w1}]
)");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.error().field, "events[0].kind");
}

// The start-up wait and the stale-evidence setting are inputs like any other: out of range, the
// error names the field.
TEST(ClusterSimulator, RefusesAStartUpOrStaleEvidenceSettingOutOfRange) {
  const std::string base = R"(
name: startup
global_batch: 64
steps: 10
profiles: {G: {product: Tesla-T4, fixed_seconds: 0.01, seconds_per_sample: 0.001, memory_gib: 16, source: test}}
workers: [{profile: G, count: 2}]
)";
  for (const auto& [extra, field] :
       {std::pair{"noise: {startup_seconds: -0.1}", "noise.startup_seconds"},
        std::pair{"noise: {startup_seconds: 0.1, startup_steps: -3}", "noise.startup_steps"},
        std::pair{"balancer: {stale_after_reports: -1}", "balancer.stale_after_reports"},
        std::pair{"noise: {shared_device: 1.5}", "noise.shared_device"}}) {
    const Result<Scenario> parsed = ParseScenario(base + extra + "\n");
    ASSERT_FALSE(parsed.ok()) << extra;
    EXPECT_EQ(parsed.error().field, field);
  }
  EXPECT_TRUE(ParseScenario(base + "noise: {startup_seconds: 0.1, startup_steps: 30}\n").ok());
}

// A start-up wait slows only a worker's first startup_steps steps, so the run's efficiency
// (against the optimum without it) is lower with it, and the same without it after it ends.
TEST(ClusterSimulator, AStartUpWaitSlowsOnlyTheFirstSteps) {
  Scenario scenario = LoadBundled("demo_startup.yaml");
  const Result<PolicyRun> with = RunScenario(scenario, balancer::PolicyKind::kEqual);
  scenario.noise.startup_seconds = 0.0;
  const Result<PolicyRun> without = RunScenario(scenario, balancer::PolicyKind::kEqual);
  ASSERT_TRUE(with.ok() && without.ok());
  const auto& slowed = with->efficiency_per_step;
  const auto& plain = without->efficiency_per_step;
  EXPECT_LT(slowed[0], 0.8 * plain[0]);
  const int steps = scenario.noise.startup_steps;
  EXPECT_NE(slowed[steps - 1], plain[steps - 1]);
  EXPECT_EQ(std::vector<double>(slowed.begin() + steps, slowed.end()),
            std::vector<double>(plain.begin() + steps, plain.end()));
}

// Workers sharing one device slow each other by the time they compute together: two equal
// workers with (nearly: the batch dither) equal batches are slowed alike, which the optimum
// accounts for, so the split's efficiency is about unchanged; under an equal split of unequal
// workers the slow one computes part of its step alone, so it is slowed less than a balanced
// split would be, and the equal split looks better against the optimum than on separate
// devices.
TEST(ClusterSimulator, WorkersSharingADeviceSlowEachOtherWhileTheyComputeTogether) {
  const std::string base = R"(
name: shared
global_batch: 64
steps: 5
profiles:
  fast: {product: NVIDIA-H200, fixed_seconds: 0.01, seconds_per_sample: 0.001, memory_gib: 140, source: test}
  slow: {product: NVIDIA-H200, fixed_seconds: 0.01, seconds_per_sample: 0.004, memory_gib: 140, source: test}
)";
  const auto first_efficiency = [&](const std::string& workers, double shared) {
    Result<Scenario> scenario = ParseScenario(base + workers + "\n");
    EXPECT_TRUE(scenario.ok());
    scenario->noise.shared_device = shared;
    const Result<PolicyRun> run = RunScenario(*scenario, balancer::PolicyKind::kEqual);
    EXPECT_TRUE(run.ok());
    return run.ok() ? run->efficiency_per_step.front() : 0.0;
  };
  const std::string equal_workers = "workers: [{profile: fast, count: 2}]";
  EXPECT_NEAR(first_efficiency(equal_workers, 0.2), first_efficiency(equal_workers, 0.0), 0.03);
  const std::string unequal = "workers: [{profile: fast, count: 1}, {profile: slow, count: 1}]";
  EXPECT_GT(first_efficiency(unequal, 0.2), 1.05 * first_efficiency(unequal, 0.0));
}

}  // namespace
}  // namespace fulcrum::sim
