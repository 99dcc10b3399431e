// Dynamic loss scaling for float16 training, as torch.cuda.amp.GradScaler does: the loss is
// multiplied by the scale before backward so small gradients do not flush to zero in float16;
// the update divides it out. A step whose aggregated gradient is not finite is skipped and the
// scale halved; after `growth_interval` good steps in a row it doubles.
//
// Every rank takes the decision from the all-reduced gradient, which every rank holds bit for
// bit (it rides the same buckets as the control values), so all ranks skip the same steps and
// keep the same scale without a collective of their own. The state is a tensor, broadcast to
// newcomers and checkpointed with the rest.
#pragma once

#include <torch/torch.h>

namespace fulcrum::trainer {

class LossScaler {
 public:
  LossScaler(double initial_scale, int growth_interval);

  double scale() const;
  // After a step: `finite` whether the aggregated gradient was finite. Returns whether the
  // update may be applied (false: skip it on every rank).
  bool Update(bool finite);
  // [scale, good steps in a row], float64: part of the training state.
  torch::Tensor& state() { return state_; }

 private:
  int growth_interval_;
  torch::Tensor state_;
};

}  // namespace fulcrum::trainer
