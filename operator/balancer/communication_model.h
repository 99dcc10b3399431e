// The split-independent all-reduce tail: the part of communication that is not hidden behind
// the backward pass. A worker's reported comm time also includes waiting for the straggler,
// so each step's tail is the smallest comm time any worker reported (the straggler's own
// wait); the estimate is the median of recent steps, which ignores one-off spikes.
#pragma once

#include <cstdint>
#include <deque>

namespace fulcrum::balancer {

class CommunicationModel {
 public:
  explicit CommunicationModel(int window_steps = 31) : window_steps_(window_steps) {}

  void Observe(int64_t step, double comm_seconds);
  double TailSeconds() const;

 private:
  int window_steps_;
  int64_t open_step_ = -1;
  double open_step_min_ = 0.0;
  std::deque<double> recent_step_minima_;
};

}  // namespace fulcrum::balancer
