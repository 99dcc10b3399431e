#include "operator/balancer/communication_model.h"

#include <algorithm>
#include <vector>

namespace fulcrum::balancer {

void CommunicationModel::Observe(int64_t step, double comm_seconds) {
  if (step == open_step_) {
    open_step_min_ = std::min(open_step_min_, comm_seconds);
    return;
  }
  if (open_step_ >= 0) {
    recent_step_minima_.push_back(open_step_min_);
    if (static_cast<int>(recent_step_minima_.size()) > window_steps_) {
      recent_step_minima_.pop_front();
    }
  }
  open_step_ = step;
  open_step_min_ = comm_seconds;
}

double CommunicationModel::TailSeconds() const {
  if (recent_step_minima_.empty()) return open_step_ >= 0 ? open_step_min_ : 0.0;
  std::vector<double> sorted(recent_step_minima_.begin(), recent_step_minima_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

}  // namespace fulcrum::balancer
