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
// Both optimizers update every parameter with one _foreach_ operation per term, as PyTorch's
// foreach implementation does: on a GPU a few multi-tensor kernels instead of three or four
// launches per parameter (ResNet-18 has 62; the launches left the GPU idle between steps); on the
// CPU the same loop as before. The arithmetic is the same, term by term.
class MomentumSgd final : public Optimizer {
 public:
  MomentumSgd(const OptimizerOptions& options, const std::vector<torch::Tensor>& parameters)
      : options_(options), buffers_(ZerosLike(parameters)) {}
  void Step(const std::vector<torch::Tensor>& parameters,
            const std::vector<torch::Tensor>& mean_gradients, double learning_rate) override {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> gradients = mean_gradients;
    if (options_.weight_decay != 0.0) {
      gradients = at::_foreach_add(gradients, parameters, options_.weight_decay);
    }
    at::_foreach_mul_(buffers_, options_.momentum);
    at::_foreach_add_(buffers_, gradients);
    if (options_.nesterov) {
      at::_foreach_add_(parameters, at::_foreach_add(gradients, buffers_, options_.momentum),
                        -learning_rate);
    } else {
      at::_foreach_add_(parameters, buffers_, -learning_rate);
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
  void Step(const std::vector<torch::Tensor>& parameters,
            const std::vector<torch::Tensor>& mean_gradients, double learning_rate) override {
    torch::NoGradGuard no_grad;
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
    steps_ += 1;
    const double t = steps_.item<double>();
    const double correction1 = 1.0 - std::pow(kBeta1, t);
    const double correction2 = 1.0 - std::pow(kBeta2, t);
    const bool decoupled = options_.kind == OptimizerKind::kAdamW;
    std::vector<torch::Tensor> gradients = mean_gradients;
    if (options_.weight_decay != 0.0) {
      if (decoupled) {
        at::_foreach_mul_(parameters, 1.0 - learning_rate * options_.weight_decay);
      } else {
        gradients = at::_foreach_add(gradients, parameters, options_.weight_decay);
      }
    }
    at::_foreach_mul_(first_, kBeta1);
    at::_foreach_add_(first_, gradients, 1.0 - kBeta1);
    at::_foreach_mul_(second_, kBeta2);
    at::_foreach_addcmul_(second_, gradients, gradients, 1.0 - kBeta2);
    std::vector<torch::Tensor> denominator = at::_foreach_div(second_, correction2);
    at::_foreach_sqrt_(denominator);
    at::_foreach_add_(denominator, kEpsilon);
    at::_foreach_addcdiv_(parameters, first_, denominator, -learning_rate / correction1);
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
