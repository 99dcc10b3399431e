#include "trainer_image/trainer/model/optimizer.h"

#include <cmath>

namespace fulcrum::trainer {
namespace {

std::vector<torch::Tensor> ZerosLike(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> zeros;
  for (const torch::Tensor& parameter : parameters) zeros.push_back(torch::zeros_like(parameter));
  return zeros;
}

std::vector<std::string> SlotNames(const std::string& slot,
                                   const std::vector<std::string>& parameter_names) {
  std::vector<std::string> names;
  for (const std::string& parameter : parameter_names) names.push_back(slot + "/" + parameter);
  return names;
}

// PyTorch's SGD with dampening 0: g <- g + wd * p; buf <- momentum * buf + g; then
// p <- p - lr * buf, or with Nesterov p <- p - lr * (g + momentum * buf).
class MomentumSgd final : public Optimizer {
 public:
  MomentumSgd(const OptimizerOptions& options, const std::vector<torch::Tensor>& parameters)
      : options_(options), buffers_(ZerosLike(parameters)) {}
  void Step(const std::vector<torch::Tensor>& parameters, double learning_rate) override {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor grad = parameters[i].grad();
      if (options_.weight_decay != 0.0) grad = grad.add(parameters[i], options_.weight_decay);
      buffers_[i].mul_(options_.momentum).add_(grad);
      if (options_.nesterov) {
        parameters[i].sub_(grad.add(buffers_[i], options_.momentum), learning_rate);
      } else {
        parameters[i].sub_(buffers_[i], learning_rate);
      }
    }
  }
  std::vector<torch::Tensor> State() override { return buffers_; }
  std::vector<std::string> StateNames(
      const std::vector<std::string>& parameter_names) const override {
    return SlotNames("momentum_buffer", parameter_names);
  }

 private:
  OptimizerOptions options_;
  std::vector<torch::Tensor> buffers_;
};

// Adam (Kingma & Ba) with bias correction, beta1 0.9, beta2 0.999, eps 1e-8, as PyTorch's:
// weight decay as an L2 term in the gradient, or decoupled for AdamW (Loshchilov & Hutter).
class Adam final : public Optimizer {
 public:
  Adam(const OptimizerOptions& options, const std::vector<torch::Tensor>& parameters)
      : options_(options),
        first_(ZerosLike(parameters)),
        second_(ZerosLike(parameters)),
        steps_(torch::zeros({1}, torch::kFloat64)) {}
  void Step(const std::vector<torch::Tensor>& parameters, double learning_rate) override {
    torch::NoGradGuard no_grad;
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
    steps_ += 1;
    const double t = steps_.item<double>();
    const double correction1 = 1.0 - std::pow(kBeta1, t);
    const double correction2 = 1.0 - std::pow(kBeta2, t);
    const bool decoupled = options_.kind == OptimizerKind::kAdamW;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      torch::Tensor grad = parameters[i].grad();
      if (options_.weight_decay != 0.0) {
        if (decoupled) {
          parameters[i].mul_(1.0 - learning_rate * options_.weight_decay);
        } else {
          grad = grad.add(parameters[i], options_.weight_decay);
        }
      }
      first_[i].mul_(kBeta1).add_(grad, 1.0 - kBeta1);
      second_[i].mul_(kBeta2).addcmul_(grad, grad, 1.0 - kBeta2);
      const torch::Tensor denominator = (second_[i] / correction2).sqrt_().add_(kEpsilon);
      parameters[i].addcdiv_(first_[i], denominator, -learning_rate / correction1);
    }
  }
  std::vector<torch::Tensor> State() override {
    std::vector<torch::Tensor> state = first_;
    state.insert(state.end(), second_.begin(), second_.end());
    state.push_back(steps_);
    return state;
  }
  std::vector<std::string> StateNames(
      const std::vector<std::string>& parameter_names) const override {
    std::vector<std::string> names = SlotNames("exp_avg", parameter_names);
    for (std::string& name : SlotNames("exp_avg_sq", parameter_names))
      names.push_back(std::move(name));
    names.push_back("step");
    return names;
  }

 private:
  OptimizerOptions options_;
  std::vector<torch::Tensor> first_;
  std::vector<torch::Tensor> second_;
  torch::Tensor steps_;
};

}  // namespace

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options,
                                         const std::vector<torch::Tensor>& parameters) {
  if (options.kind == OptimizerKind::kSgd)
    return std::make_unique<MomentumSgd>(options, parameters);
  return std::make_unique<Adam>(options, parameters);
}

}  // namespace fulcrum::trainer
