#include "trainer_image/trainer/model/loss_scaler.h"

namespace fulcrum::trainer {

LossScaler::LossScaler(double initial_scale, int growth_interval)
    : growth_interval_(growth_interval),
      state_(torch::tensor({initial_scale, 0.0}, torch::kFloat64)) {}

double LossScaler::scale() const {
  return state_.data_ptr<double>()[0];
}

bool LossScaler::Update(bool finite) {
  double* state = state_.data_ptr<double>();
  if (!finite) {
    state[0] *= 0.5;
    state[1] = 0.0;
    return false;
  }
  state[1] += 1.0;
  if (state[1] >= growth_interval_) {
    state[0] *= 2.0;
    state[1] = 0.0;
  }
  return true;
}

}  // namespace fulcrum::trainer
