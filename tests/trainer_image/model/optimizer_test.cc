// fulcrum-trainer's optimizers make the same updates as PyTorch's torch.optim (libtorch's C++
// twins): SGD with momentum, Nesterov and weight decay, Adam with L2 weight decay, AdamW with
// decoupled weight decay. Five steps on random parameters and gradients.
#include "trainer_image/trainer/model/optimizer.h"

#include <gtest/gtest.h>

namespace fulcrum::trainer {
namespace {

std::vector<torch::Tensor> RandomParameters() {
  torch::manual_seed(3);
  return {torch::randn({4, 3}), torch::randn({3}), torch::randn({2, 2, 2})};
}

std::vector<torch::Tensor> Copies(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const torch::Tensor& tensor : tensors)
    copies.push_back(tensor.clone().set_requires_grad(true));
  return copies;
}

// Runs ours and `reference` for five steps on the same gradients; the largest difference.
double LargestDifference(const OptimizerOptions& options, torch::optim::Optimizer& reference,
                         std::vector<torch::Tensor>& theirs) {
  std::vector<torch::Tensor> ours = Copies(RandomParameters());
  std::unique_ptr<Optimizer> optimizer = MakeOptimizer(options, ours);
  torch::manual_seed(11);
  for (int step = 0; step < 5; ++step) {
    std::vector<torch::Tensor> gradients;
    for (std::size_t i = 0; i < ours.size(); ++i) {
      const torch::Tensor gradient = torch::randn_like(ours[i]);
      gradients.push_back(gradient.clone());
      theirs[i].mutable_grad() = gradient.clone();
    }
    optimizer->Step(ours, gradients, options.learning_rate);
    reference.step();
  }
  double largest = 0.0;
  for (std::size_t i = 0; i < ours.size(); ++i)
    largest = std::max(largest, (ours[i] - theirs[i]).abs().max().item<double>());
  return largest;
}

TEST(Optimizer, SgdWithNesterovMomentumAndWeightDecayIsPyTorchs) {
  OptimizerOptions options{.kind = OptimizerKind::kSgd,
                           .learning_rate = 0.1,
                           .momentum = 0.9,
                           .nesterov = true,
                           .weight_decay = 0.01};
  std::vector<torch::Tensor> theirs = Copies(RandomParameters());
  torch::optim::SGD reference(
      theirs, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01));
  EXPECT_LT(LargestDifference(options, reference, theirs), 1e-6);
}

TEST(Optimizer, AdamWithL2WeightDecayIsPyTorchs) {
  OptimizerOptions options{.kind = OptimizerKind::kAdam,
                           .learning_rate = 0.01,
                           .momentum = 0.0,
                           .nesterov = false,
                           .weight_decay = 0.05};
  std::vector<torch::Tensor> theirs = Copies(RandomParameters());
  torch::optim::Adam reference(theirs, torch::optim::AdamOptions(0.01).weight_decay(0.05));
  EXPECT_LT(LargestDifference(options, reference, theirs), 1e-6);
}

TEST(Optimizer, AdamWWithDecoupledWeightDecayIsPyTorchs) {
  OptimizerOptions options{.kind = OptimizerKind::kAdamW,
                           .learning_rate = 0.01,
                           .momentum = 0.0,
                           .nesterov = false,
                           .weight_decay = 0.1};
  std::vector<torch::Tensor> theirs = Copies(RandomParameters());
  torch::optim::AdamW reference(theirs, torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  EXPECT_LT(LargestDifference(options, reference, theirs), 1e-6);
  // Decoupled is not L2: the same settings as Adam end elsewhere.
  std::vector<torch::Tensor> l2 = Copies(RandomParameters());
  torch::optim::Adam adam(l2, torch::optim::AdamOptions(0.01).weight_decay(0.1));
  EXPECT_GT(LargestDifference(options, adam, l2), 1e-4);
}

// What sharded data parallel relies on: optimizers made over slices of one flat parameter buffer
// (cut across parameters, as shards are), given the same slices of the flat gradients, end
// where one optimizer over every parameter does. The step count of Adam is per optimizer, and
// every shard's counts the same steps.
TEST(Optimizer, OptimizersOverSlicesOfAFlatBufferUpdateAsOneOverEveryParameter) {
  const OptimizerOptions sgd{.kind = OptimizerKind::kSgd,
                             .learning_rate = 0.1,
                             .momentum = 0.9,
                             .nesterov = false,
                             .weight_decay = 0.01};
  const OptimizerOptions adamw{.kind = OptimizerKind::kAdamW,
                               .learning_rate = 0.01,
                               .momentum = 0.0,
                               .nesterov = false,
                               .weight_decay = 0.1};
  auto flatten = [](const std::vector<torch::Tensor>& tensors) {
    std::vector<torch::Tensor> flat;
    for (const torch::Tensor& tensor : tensors) flat.push_back(tensor.detach().reshape({-1}));
    return torch::cat(flat);
  };
  for (const OptimizerOptions& options : {sgd, adamw}) {
    std::vector<torch::Tensor> whole = Copies(RandomParameters());
    std::unique_ptr<Optimizer> one = MakeOptimizer(options, whole);
    // 23 elements in all (12 + 3 + 8), cut at 7 and 16: the first and last shards cut a tensor.
    torch::Tensor flat = flatten(RandomParameters());
    const std::vector<std::pair<int64_t, int64_t>> shards = {{0, 7}, {7, 9}, {16, 7}};
    std::vector<std::unique_ptr<Optimizer>> sharded;
    for (const auto& [begin, size] : shards)
      sharded.push_back(MakeOptimizer(options, {flat.narrow(0, begin, size)}));
    torch::manual_seed(11);
    for (int step = 0; step < 5; ++step) {
      std::vector<torch::Tensor> gradients;
      for (const torch::Tensor& parameter : whole)
        gradients.push_back(torch::randn_like(parameter));
      one->Step(whole, gradients, options.learning_rate);
      const torch::Tensor flat_gradients = flatten(gradients);
      for (std::size_t s = 0; s < shards.size(); ++s) {
        const auto [begin, size] = shards[s];
        sharded[s]->Step({flat.narrow(0, begin, size)}, {flat_gradients.narrow(0, begin, size)},
                         options.learning_rate);
      }
    }
    EXPECT_LT((flatten(whole) - flat).abs().max().item<double>(), 1e-7);
    // Each optimizer's state covers its slice only.
    EXPECT_EQ(sharded[1]->State().front().numel(), 9);
  }
}

}  // namespace
}  // namespace fulcrum::trainer
