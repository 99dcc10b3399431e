#include "trainer_image/trainer/model/optimizer.h"

#include <cmath>

namespace fulcrum::trainer {
namespace {

std::vector<torch::Tensor> ZerosLike(const std::vector<torch::Tensor>& parameters) {
  std::vector<torch::Tensor> zeros;
  for (const torch::Tensor& parameter : parameters) zeros.push_back(torch::zeros_like(parameter));
  return zeros;
}

// buf <- momentum * buf + g; p <- p - lr * buf (PyTorch's SGD with dampening 0).
class MomentumSgd final : public Optimizer {
 public:
  MomentumSgd(double learning_rate, double momentum, const std::vector<torch::Tensor>& parameters)
      : learning_rate_(learning_rate), momentum_(momentum), buffers_(ZerosLike(parameters)) {}
  void Step(const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      buffers_[i].mul_(momentum_).add_(parameters[i].grad());
      parameters[i].sub_(buffers_[i], learning_rate_);
    }
  }
  std::vector<torch::Tensor> State() override { return buffers_; }

 private:
  double learning_rate_;
  double momentum_;
  std::vector<torch::Tensor> buffers_;
};

// Adam (Kingma & Ba) with bias correction, beta1 0.9, beta2 0.999, eps 1e-8.
class Adam final : public Optimizer {
 public:
  Adam(double learning_rate, const std::vector<torch::Tensor>& parameters)
      : learning_rate_(learning_rate),
        first_(ZerosLike(parameters)),
        second_(ZerosLike(parameters)),
        steps_(torch::zeros({1}, torch::kFloat64)) {}
  void Step(const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEpsilon = 1e-8;
    steps_ += 1;
    const double t = steps_.item<double>();
    const double correction1 = 1.0 - std::pow(kBeta1, t);
    const double correction2 = 1.0 - std::pow(kBeta2, t);
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const torch::Tensor& grad = parameters[i].grad();
      first_[i].mul_(kBeta1).add_(grad, 1.0 - kBeta1);
      second_[i].mul_(kBeta2).addcmul_(grad, grad, 1.0 - kBeta2);
      const torch::Tensor denominator = (second_[i] / correction2).sqrt_().add_(kEpsilon);
      parameters[i].addcdiv_(first_[i], denominator, -learning_rate_ / correction1);
    }
  }
  std::vector<torch::Tensor> State() override {
    std::vector<torch::Tensor> state = first_;
    state.insert(state.end(), second_.begin(), second_.end());
    state.push_back(steps_);
    return state;
  }

 private:
  double learning_rate_;
  std::vector<torch::Tensor> first_;
  std::vector<torch::Tensor> second_;
  torch::Tensor steps_;
};

}  // namespace

std::unique_ptr<Optimizer> MakeOptimizer(const OptimizerOptions& options,
                                         const std::vector<torch::Tensor>& parameters) {
  if (options.kind == OptimizerKind::kAdam)
    return std::make_unique<Adam>(options.learning_rate, parameters);
  return std::make_unique<MomentumSgd>(options.learning_rate, options.momentum, parameters);
}

}  // namespace fulcrum::trainer
