// fulcrum-sim: runs scenarios through the balancer under each policy and prints JSON.
//   fulcrum-sim [--policy optimal|proportional|equal|all] [--steps N] [--jitter F] [--trace]
//               SCENARIO.yaml...
// --trace adds each step's efficiency and batches, and each plan's step and reason; --jitter sets
// every scenario's noise.jitter (relative std. dev. of the true per-step compute time). Exit codes:
// 0 ok, 2 bad arguments or scenario.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/sim/cluster_simulator.h"
#include "bench/sim/scenario.h"

namespace {

using fulcrum::balancer::PolicyKind;
using nlohmann::ordered_json;

constexpr int kBadInput = 2;

ordered_json ToJson(const fulcrum::sim::PolicyRun& run, bool trace) {
  ordered_json events = ordered_json::array();
  for (const fulcrum::sim::EventOutcome& event : run.events) {
    events.push_back({{"step", event.step},
                      {"event", event.description},
                      {"reaction_steps", event.reaction_steps ? ordered_json(*event.reaction_steps)
                                                              : ordered_json(nullptr)},
                      {"plan_changes", event.plan_changes},
                      {"slowed_batch_rises", event.slowed_batch_rises}});
  }
  ordered_json out = {{"samples_per_second", run.samples_per_second},
                      {"ideal_samples_per_second", run.ideal_samples_per_second},
                      {"efficiency", run.efficiency},
                      {"oracle_efficiency", run.oracle_efficiency},
                      {"idle_fraction", run.idle_fraction},
                      {"plan_changes", run.plan_changes},
                      {"out_of_memory_steps", run.out_of_memory_steps},
                      {"pathological_steps", run.pathological_steps},
                      {"last_pathological_step", run.last_pathological_step},
                      {"events", events}};
  if (trace) {
    out["efficiency_per_step"] = run.efficiency_per_step;
    out["split_efficiency_per_step"] = run.split_efficiency_per_step;
    out["batches_per_step"] = run.batches_per_step;
    ordered_json plans = ordered_json::array();
    for (const auto& [step, reason] : run.plan_reasons) {
      plans.push_back({{"step", step}, {"reason", reason}});
    }
    out["plans"] = plans;
  }
  return out;
}

int Fail(const std::string& message) {
  std::cerr << "fulcrum-sim: error: " << message << "\n";
  return kBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<PolicyKind> policies = {PolicyKind::kOptimal, PolicyKind::kProportional,
                                      PolicyKind::kEqual};
  std::optional<int64_t> steps;
  std::optional<double> jitter;
  bool trace = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--policy" && i + 1 < argc) {
      const std::string value = argv[++i];
      if (value != "all") {
        fulcrum::Result<PolicyKind> policy = fulcrum::balancer::ParsePolicyKind(value, "--policy");
        if (!policy.ok()) return Fail(policy.error().ToString());
        policies = {*policy};
      }
    } else if (arg == "--trace") {
      trace = true;
    } else if (arg == "--steps" && i + 1 < argc) {
      steps = std::stoll(argv[++i]);
      if (*steps < 1) return Fail("--steps must be >= 1");
    } else if (arg == "--jitter" && i + 1 < argc) {
      jitter = std::stod(argv[++i]);
      if (!(*jitter >= 0.0 && *jitter <= 0.3)) return Fail("--jitter must be in [0, 0.3]");
    } else if (!arg.empty() && arg[0] == '-') {
      return Fail("unknown option " + arg +
                  "; usage: fulcrum-sim [--policy NAME|all] [--steps N] [--jitter F] "
                  "[--trace] SCENARIO.yaml...");
    } else {
      paths.push_back(arg);
    }
  }
  if (paths.empty()) return Fail("no scenario; usage: fulcrum-sim [options] SCENARIO.yaml...");

  ordered_json report = ordered_json::array();
  for (const std::string& path : paths) {
    fulcrum::Result<fulcrum::sim::Scenario> scenario = fulcrum::sim::LoadScenario(path);
    if (!scenario.ok()) return Fail(scenario.error().ToString());
    if (jitter) scenario->noise.jitter = *jitter;
    if (steps) {
      scenario->steps = *steps;
      std::erase_if(scenario->events, [&](const auto& event) { return event.step >= *steps; });
    }
    ordered_json runs = ordered_json::object();
    std::optional<double> optimal_rate;
    for (PolicyKind policy : policies) {
      fulcrum::Result<fulcrum::sim::PolicyRun> run = fulcrum::sim::RunScenario(*scenario, policy);
      if (!run.ok()) return Fail(scenario->name + ": " + run.error().ToString());
      runs[std::string(ToString(policy))] = ToJson(*run, trace);
      if (policy == PolicyKind::kOptimal) optimal_rate = run->samples_per_second;
    }
    ordered_json entry = {{"scenario", scenario->name},
                          {"global_batch", scenario->global_batch},
                          {"steps", scenario->steps},
                          {"policies", runs}};
    // Speed-ups measured in this same run: optimal's samples/s over each baseline's.
    if (optimal_rate) {
      for (const char* baseline : {"proportional", "equal"}) {
        if (runs.contains(baseline)) {
          entry[std::string("optimal_speedup_vs_") + baseline] =
              *optimal_rate / runs[baseline]["samples_per_second"].get<double>();
        }
      }
    }
    report.push_back(entry);
  }
  std::cout << report.dump(2) << "\n";
  return 0;
}
