// Plan time of each policy for 8, 100, 1,000 and 10,000 workers, printed as JSON.
// Goal: optimal under 1 ms at 1,000 workers. Ratios against the equal policy on the same
// input, measured in the same run, say how much the exact min-max costs over DDP's split.
//   fulcrum-balancer-bench [--repetitions N]
#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "operator/balancer/planner.h"

namespace {

using fulcrum::balancer::MakePlan;
using fulcrum::balancer::MakePolicy;
using fulcrum::balancer::PlanRequest;
using fulcrum::balancer::PolicyKind;

// The six ResNet-50 profiles of bench/scenarios/scale1000.yaml, ±10% per worker.
PlanRequest ClusterOf(int workers, std::mt19937_64& random) {
  struct Profile {
    double fixed;
    double per_sample;
  };
  constexpr Profile kProfiles[] = {{0.034, 0.0002716}, {0.034, 0.000700}, {0.018, 0.002283},
                                   {0.030, 0.001133},  {0.030, 0.002383}, {0.030, 0.000684}};
  std::uniform_real_distribution<double> jitter(0.9, 1.1);
  PlanRequest request;
  request.global_batch = 64 * workers;
  request.tail_seconds = 0.02;
  for (int i = 0; i < workers; ++i) {
    const Profile& p = kProfiles[i % 6];
    request.workers.push_back({"w" + std::to_string(i), p.fixed * jitter(random),
                               p.per_sample * jitter(random), 1, 290, 64});
  }
  return request;
}

// Median wall time of one MakePlan call, in microseconds.
double MedianPlanMicros(const PlanRequest& request, PolicyKind kind, int repetitions) {
  const auto policy = MakePolicy(kind);
  std::vector<double> micros;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    auto plan = MakePlan(request, *policy);
    const auto stop = std::chrono::steady_clock::now();
    if (!plan.ok()) {
      std::cerr << plan.error().ToString() << "\n";
      std::exit(1);
    }
    micros.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  std::nth_element(micros.begin(), micros.begin() + micros.size() / 2, micros.end());
  return micros[micros.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repetitions = 51;
  if (argc == 3 && std::string(argv[1]) == "--repetitions") repetitions = std::stoi(argv[2]);
  std::mt19937_64 random(1);
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (int workers : {8, 100, 1000, 10000}) {
    const PlanRequest request = ClusterOf(workers, random);
    nlohmann::ordered_json row = {{"workers", workers}, {"global_batch", request.global_batch}};
    double equal_micros = 0.0;
    for (PolicyKind kind : {PolicyKind::kEqual, PolicyKind::kProportional, PolicyKind::kOptimal}) {
      const double micros = MedianPlanMicros(request, kind, repetitions);
      row[std::string(ToString(kind)) + "_plan_microseconds"] = micros;
      if (kind == PolicyKind::kEqual) equal_micros = micros;
      if (kind == PolicyKind::kOptimal) {
        row["optimal_over_equal_time_ratio"] = micros / equal_micros;
        row["optimal_under_1ms"] = micros < 1000.0;
      }
    }
    results.push_back(row);
  }
  std::cout << nlohmann::ordered_json{{"benchmark", "plan_time"},
                                      {"repetitions", repetitions},
                                      {"results", results}}
                   .dump(2)
            << "\n";
  return 0;
}
