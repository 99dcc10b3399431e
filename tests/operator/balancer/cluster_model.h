// A cluster model for controller tests that is as unkind as a real one (issue 25): true costs
// that are not a line (flat below a knee, then linear), timing noise plus contention that an
// emulated slowdown does not scale (emulation multiplies compute, not the wait for a core),
// and the coordinator's apply lead (a plan decided after step t runs from step t + lead; until
// then the workers keep running and reporting the old batches). Test support, header only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "operator/balancer/controller.h"

namespace fulcrum::balancer::testing {

struct ModelWorker {
  std::string id;
  std::string gpu;
  double fixed_seconds = 0.0;       // a
  double seconds_per_sample = 0.0;  // k
  int knee = 1;                     // c(b) = a + k·max(b, knee): no faster below the knee
  double slowdown = 1.0;            // emulated: multiplies compute, not contention
  // A start-up wait added to the first steps, fading linearly to none over
  // ClusterNoise::startup_steps: a trainer's data pipeline filling its prefetch queue and its
  // allocator growing compete for the cores with the compute, a cost no batch size scales.
  double startup_seconds = 0.0;

  // The true compute time of one step at `batch`, without noise or contention.
  double Seconds(int batch) const {
    if (batch <= 0) return 0.0;
    return slowdown * (fixed_seconds + seconds_per_sample * std::max(batch, knee));
  }
};

struct ClusterNoise {
  double relative = 0.03;           // normal, relative to the compute time
  double contention_seconds = 0.0;  // mean of an exponential wait added to every step
  double tail_seconds = 0.01;       // all-reduce after the last worker's compute
  int startup_steps = 0;            // steps over which ModelWorker::startup_seconds fades
};

class ClusterModel {
 public:
  ClusterModel(std::vector<ModelWorker> workers, ClusterNoise noise, int apply_lead_steps,
               uint64_t seed)
      : workers_(std::move(workers)),
        noise_(noise),
        apply_lead_steps_(apply_lead_steps),
        random_(seed) {}

  Status Join(Controller& controller) {
    for (const ModelWorker& worker : workers_) {
      if (Status status = controller.AddWorker({worker.id, worker.gpu}); !status.ok()) {
        return status;
      }
    }
    Result<StepDecision> first = controller.Decide(0);
    if (!first.ok()) return first.error();
    running_ = first->batches;
    return Ok();
  }

  // Runs `step` with the batches that apply to it, reports every worker's timings, then lets
  // the controller decide for step + lead, as the coordinator does when a step completes.
  // Returns whether that decision changed the plan.
  bool Step(Controller& controller, int64_t step) {
    while (!scheduled_.empty() && scheduled_.begin()->first <= step) {
      running_ = scheduled_.begin()->second;
      scheduled_.erase(scheduled_.begin());
    }
    std::normal_distribution<double> relative(0.0, noise_.relative);
    std::exponential_distribution<double> contention(
        noise_.contention_seconds > 0.0 ? 1.0 / noise_.contention_seconds : 1.0);
    std::vector<double> compute(workers_.size());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      const double wait = noise_.contention_seconds > 0.0 ? contention(random_) : 0.0;
      const double starting = step < noise_.startup_steps
                                  ? workers_[i].startup_seconds *
                                        (1.0 - static_cast<double>(step) / noise_.startup_steps)
                                  : 0.0;
      compute[i] = workers_[i].Seconds(running_[i]) * std::max(0.5, 1.0 + relative(random_)) +
                   wait + starting;
    }
    const double slowest = *std::max_element(compute.begin(), compute.end());
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      StepReport report;
      report.worker_id = workers_[i].id;
      report.step = step;
      report.local_batch = running_[i];
      report.compute_seconds = compute[i];
      report.comm_seconds = slowest - compute[i] + noise_.tail_seconds;
      EXPECT_TRUE(controller.Observe(report).ok());
    }
    Result<StepDecision> decision = controller.Decide(step + apply_lead_steps_);
    EXPECT_TRUE(decision.ok()) << decision.error().ToString();
    if (!decision.ok()) return false;
    EXPECT_EQ(std::accumulate(decision->batches.begin(), decision->batches.end(), 0),
              controller.plan().global_batch);
    scheduled_[step + apply_lead_steps_] = decision->batches;
    return decision->plan_changed;
  }

  ModelWorker& worker(std::size_t i) { return workers_[i]; }
  // What the workers run now (the last step's batches).
  const std::vector<int>& running() const { return running_; }

  // The true optimum's step compute time for `global_batch`: every worker at least one
  // sample, then each next sample to the worker it costs least (exact: costs never fall).
  double OptimalSeconds(int global_batch) const {
    return BottleneckSeconds(OptimalBatches(global_batch));
  }
  // The split behind OptimalSeconds.
  std::vector<int> OptimalBatches(int global_batch) const {
    std::vector<int> batches(workers_.size(), 1);
    for (int given = static_cast<int>(workers_.size()); given < global_batch; ++given) {
      std::size_t cheapest = 0;
      for (std::size_t i = 1; i < workers_.size(); ++i) {
        if (workers_[i].Seconds(batches[i] + 1) <
            workers_[cheapest].Seconds(batches[cheapest] + 1)) {
          cheapest = i;
        }
      }
      ++batches[cheapest];
    }
    return batches;
  }
  double BottleneckSeconds(const std::vector<int>& batches) const {
    double slowest = 0.0;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      slowest = std::max(slowest, workers_[i].Seconds(batches[i]));
    }
    return slowest;
  }
  // η of what runs now under the true costs: optimal step time ÷ this split's (tail included).
  double TrueEfficiency() const {
    const int global_batch = std::accumulate(running_.begin(), running_.end(), 0);
    return (OptimalSeconds(global_batch) + noise_.tail_seconds) /
           (BottleneckSeconds(running_) + noise_.tail_seconds);
  }

 private:
  std::vector<ModelWorker> workers_;
  ClusterNoise noise_;
  int apply_lead_steps_;
  std::mt19937_64 random_;
  std::vector<int> running_;
  std::map<int64_t, std::vector<int>> scheduled_;  // apply step -> batches
};

}  // namespace fulcrum::balancer::testing
