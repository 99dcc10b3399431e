// Drives emulated jobs: ticks every job every 2 ms (its due steps and heartbeats) on a few
// threads, each its share of the jobs. One thread falls behind at thousands of trainers, since
// their messages are serialised on the thread that sends them.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "bench/coordinator/emulated_job.h"

namespace fulcrum::bench {

class JobDriver {
 public:
  // `jobs` must outlive the driver and keep its size. `on_tick`, if set, runs on the first
  // thread after each pass over its share (leaves, joins, whatever else is due).
  JobDriver(std::vector<std::unique_ptr<EmulatedJob>>& jobs, std::size_t threads,
            std::function<void(Clock::time_point)> on_tick = {});
  JobDriver(const JobDriver&) = delete;
  JobDriver& operator=(const JobDriver&) = delete;

 private:
  void Run(std::stop_token stop, std::size_t shard);

  std::vector<std::unique_ptr<EmulatedJob>>& jobs_;
  const std::size_t shards_;
  std::function<void(Clock::time_point)> on_tick_;
  std::vector<std::jthread> threads_;  // last: started once what they use exists
};

}  // namespace fulcrum::bench
