#include "bench/coordinator/job_driver.h"

#include <algorithm>
#include <utility>

namespace fulcrum::bench {

JobDriver::JobDriver(std::vector<std::unique_ptr<EmulatedJob>>& jobs, std::size_t threads,
                     std::function<void(Clock::time_point)> on_tick)
    : jobs_(jobs), shards_(std::max<std::size_t>(threads, 1)), on_tick_(std::move(on_tick)) {
  for (std::size_t shard = 0; shard < shards_; ++shard) {
    threads_.emplace_back([this, shard](std::stop_token stop) { Run(stop, shard); });
  }
}

void JobDriver::Run(std::stop_token stop, std::size_t shard) {
  while (!stop.stop_requested()) {
    const auto now = Clock::now();
    for (std::size_t j = shard; j < jobs_.size(); j += shards_) jobs_[j]->Tick(now);
    if (shard == 0 && on_tick_) on_tick_(now);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace fulcrum::bench
