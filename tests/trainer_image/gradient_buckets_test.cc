// GradientBuckets against a recording collective: which values go out in which collective, and
// that the step's control values ride in the last gradient bucket instead of a collective of
// their own.
#include "trainer_image/trainer/collective/gradient_buckets.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace fulcrum::trainer {
namespace {

// Stands for a world of two identical ranks: every all-reduce doubles its values at once.
// Records the length of each collective started.
class DoublingCollective final : public Collective {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  Status AllReduceSum(std::span<float> values) override {
    Record(values);
    return Ok();
  }
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSum(std::span<float> values) override {
    Record(values);
    return std::unique_ptr<PendingCollective>(std::make_unique<FinishedCollective>(Ok()));
  }
  Result<std::unique_ptr<PendingCollective>> StartAllReduceSumOnDevice(std::span<float>,
                                                                       void*) override {
    return MakeError(ErrorCode::kFailedPrecondition, "host only");
  }
  Status AllReduceSum(std::span<double>) override {
    ++double_collectives;
    return Ok();
  }
  Status Broadcast(std::span<std::byte>, int) override { return Ok(); }
  bool Abort(const std::string&) override { return false; }

  std::vector<std::size_t> started;  // lengths, in order
  int double_collectives = 0;

 private:
  void Record(std::span<float> values) {
    for (float& value : values) value *= 2.0F;
    started.push_back(values.size());
  }
};

// Two parameters of 6 and 4 elements; with buckets of at least 4 elements the last parameter
// (produced first by backward) fills bucket 0 and the first fills bucket 1, the last bucket.
// One averaged tensor (a buffer) of 2 elements rides the last bucket.
struct TwoLayers {
  explicit TwoLayers(CollectiveMemory memory)
      : buckets{
            {first, second}, /*bucket_elements=*/4, torch::Device(torch::kCPU), {buffer}, memory} {}
  torch::Tensor first = torch::ones({6}, torch::requires_grad());
  torch::Tensor second = torch::ones({4}, torch::requires_grad());
  torch::Tensor buffer = torch::tensor({2.0F, 6.0F});
  GradientBuckets buckets;

  void Backward() { ((first * 3.0).sum() + (second * 5.0).sum()).backward(); }
};

// Every behaviour holds whether the collective reduces the buffer itself or a host mirror of it
// (the path GPU buckets take to Gloo, here on the CPU).
class GradientBucketsIn : public testing::TestWithParam<CollectiveMemory> {
 protected:
  TwoLayers model{GetParam()};
};
INSTANTIATE_TEST_SUITE_P(Memory, GradientBucketsIn,
                         testing::Values(CollectiveMemory::kBufferDevice,
                                         CollectiveMemory::kHostMirror),
                         [](const testing::TestParamInfo<CollectiveMemory>& info) {
                           return info.param == CollectiveMemory::kHostMirror ? "HostMirror"
                                                                              : "Buffer";
                         });

TEST_P(GradientBucketsIn, TheControlValuesTravelAtTheEndOfTheLastBucketAndComeBackSummed) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 3);
  model.buckets.Arm();
  model.Backward();
  model.buckets.SetControl(std::vector<double>{1.0, 7.0, 40.0});
  ASSERT_TRUE(model.buckets.Finish().ok());

  // One chain of bucket collectives per step, the last one longer by the averaged buffer (2) and
  // the 3 control values; nothing else.
  EXPECT_EQ(collective.started, (std::vector<std::size_t>{4, 6 + 2 + 3}));
  EXPECT_EQ(collective.double_collectives, 0);
  EXPECT_EQ(model.buckets.SummedControl(), (std::vector<double>{2.0, 14.0, 80.0}));
}

TEST_P(GradientBucketsIn, TheLocalSquaredNormIsTakenBeforeTheAllReduceOverwritesTheBuckets) {
  // Gradients 3 (6 elements) and 5 (4 elements): 6·9 + 4·25 = 154 on this rank; the doubling
  // collective would make it 616 if it were read after the all-reduce.
  for (bool overlap : {true, false}) {
    TwoLayers layers(GetParam());
    DoublingCollective collective;
    layers.buckets.BeginStep(collective, nullptr, 1);
    if (overlap) layers.buckets.Arm();
    layers.Backward();
    layers.buckets.SetControl(std::vector<double>{1.0});
    ASSERT_TRUE(layers.buckets.Finish().ok());
    EXPECT_DOUBLE_EQ(layers.buckets.LocalSquaredNorm().item<double>(), 154.0)
        << "overlap " << overlap;
    // The next step starts from zero.
    layers.first.mutable_grad().zero_();
    layers.second.mutable_grad().zero_();
    layers.buckets.BeginStep(collective, nullptr, 1);
    layers.Backward();
    layers.buckets.SetControl(std::vector<double>{1.0});
    ASSERT_TRUE(layers.buckets.Finish().ok());
    EXPECT_DOUBLE_EQ(layers.buckets.LocalSquaredNorm().item<double>(), 154.0);
  }
}

TEST_P(GradientBucketsIn, AControlValueLeftOnTheDeviceIsAddedToItsSlotAndSummed) {
  // The trainer leaves the loss sum on the device; it rides its slot like the host's values.
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 3);
  model.Backward();
  const GradientBuckets::DeviceValue loss{1, torch::full({}, 2.25, torch::kFloat64)};
  model.buckets.SetControl(std::vector<double>{4.0, 0.0, 1.0}, 0.0, std::span(&loss, 1));
  ASSERT_TRUE(model.buckets.Finish().ok());
  EXPECT_EQ(model.buckets.SummedControl(), (std::vector<double>{8.0, 4.5, 2.0}));
}

TEST_P(GradientBucketsIn, AControlValueBeyondTheControlValuesFailsTheStep) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 1);
  model.Backward();
  const GradientBuckets::DeviceValue stray{1, torch::ones({}, torch::kFloat64)};
  model.buckets.SetControl(std::vector<double>{4.0}, 0.0, std::span(&stray, 1));
  EXPECT_FALSE(model.buckets.Finish().ok());
}

TEST_P(GradientBucketsIn, TheLastBucketWaitsForTheControlValues) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 2);
  model.buckets.Arm();
  model.Backward();
  // Backward filled both buckets, but only the first may go: the last still lacks the control.
  EXPECT_EQ(collective.started.size(), 1U);
  model.buckets.SetControl(std::vector<double>{1.0, 2.0});
  EXPECT_EQ(collective.started.size(), 2U);
  ASSERT_TRUE(model.buckets.Finish().ok());
}

TEST_P(GradientBucketsIn, MeanGradientsDivideTheGradientsButNotTheControlValues) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 1);
  model.Backward();  // not armed: everything goes out in Finish
  model.buckets.SetControl(std::vector<double>{10.0});
  ASSERT_TRUE(model.buckets.Finish().ok());
  model.buckets.WriteMeanGradients(4.0);

  // Summed over the two identical ranks (x2), divided by the global batch (/4).
  EXPECT_TRUE(torch::allclose(model.first.grad(), torch::full({6}, 3.0 * 2 / 4)));
  EXPECT_TRUE(torch::allclose(model.second.grad(), torch::full({4}, 5.0 * 2 / 4)));
  EXPECT_EQ(model.buckets.SummedControl(), (std::vector<double>{20.0}));
}

TEST_P(GradientBucketsIn, EachStepStartsFromNoGradientsSoTheLastMeanIsNotAddedIn) {
  // The mean gradients are left in the parameters' .grad; the next step's backward must not add
  // to them (autograd would, and the hooks would see the sum), whoever forgets to clear them.
  DoublingCollective collective;
  for (int step = 0; step < 2; ++step) {
    model.buckets.BeginStep(collective, nullptr, 1);
    model.buckets.Arm();
    model.Backward();
    model.buckets.SetControl(std::vector<double>{4.0});
    ASSERT_TRUE(model.buckets.Finish().ok());
    model.buckets.WriteMeanGradients(4.0);
    EXPECT_TRUE(torch::allclose(model.first.grad(), torch::full({6}, 3.0 * 2 / 4))) << step;
    EXPECT_TRUE(torch::allclose(model.second.grad(), torch::full({4}, 5.0 * 2 / 4))) << step;
  }
}

TEST_P(GradientBucketsIn, AChannelsLastWeightGetsItsMeanGradientInItsOwnMemoryOrder) {
  // A convolution's weight [out, in, h, w] kept channels_last: its mean gradient must have the
  // same strides (multi-tensor optimizer kernels take their fast path only when parameters,
  // gradients and state are laid out alike) and the right value at every index.
  torch::Tensor weight =
      torch::zeros({2, 3, 2, 2}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
  const torch::Tensor coefficients = torch::arange(24, torch::kFloat32).view({2, 3, 2, 2});
  GradientBuckets buckets({weight}, /*bucket_elements=*/8, torch::Device(torch::kCPU), {},
                          GetParam());
  DoublingCollective collective;
  buckets.BeginStep(collective, nullptr, 1);
  buckets.Arm();
  (weight * coefficients).sum().backward();
  buckets.SetControl(std::vector<double>{2.0});
  ASSERT_TRUE(buckets.Finish().ok());
  buckets.WriteMeanGradients(2.0);

  EXPECT_EQ(weight.grad().strides(), weight.strides());
  EXPECT_TRUE(torch::equal(weight.grad(), coefficients));  // doubled by two ranks, halved
}

TEST_P(GradientBucketsIn, ClippingScalesTheMeanGradientToTheGlobalNormOnlyWhenLarger) {
  DoublingCollective collective;
  for (double max_norm : {0.0, 100.0, 1.0}) {
    model.first.mutable_grad() = torch::Tensor();  // each step starts without gradients
    model.second.mutable_grad() = torch::Tensor();
    model.buckets.BeginStep(collective, nullptr, 1);
    model.Backward();
    model.buckets.SetControl(std::vector<double>{10.0});
    ASSERT_TRUE(model.buckets.Finish().ok());
    // Mean gradients 1.5 (6 of them) and 2.5 (4): a global norm of sqrt(6 * 2.25 + 4 * 6.25).
    const double norm = model.buckets.WriteMeanGradients(4.0, max_norm).item<double>();
    EXPECT_NEAR(norm, std::sqrt(6 * 2.25 + 4 * 6.25), 1e-6);
    const double scale = max_norm == 1.0 ? 1.0 / norm : 1.0;
    EXPECT_TRUE(torch::allclose(model.first.grad(), torch::full({6}, 1.5 * scale))) << max_norm;
    EXPECT_TRUE(torch::allclose(model.second.grad(), torch::full({4}, 2.5 * scale))) << max_norm;
  }
  const double clipped = std::sqrt(model.first.grad().square().sum().item<double>() +
                                   model.second.grad().square().sum().item<double>());
  EXPECT_NEAR(clipped, 1.0, 1e-6);
}

TEST_P(GradientBucketsIn, AWiderWorldsLongerControlFitsInTheNextStep) {
  DoublingCollective collective;
  for (std::size_t control_elements : {2U, 9U}) {
    collective.started.clear();
    model.buckets.BeginStep(collective, nullptr, control_elements);
    model.Backward();
    const std::vector<double> control(control_elements, 1.0);
    model.buckets.SetControl(control);
    ASSERT_TRUE(model.buckets.Finish().ok());
    EXPECT_EQ(collective.started.back(), 6 + 2 + control_elements);
    EXPECT_EQ(model.buckets.SummedControl(), std::vector<double>(control_elements, 2.0));
    for (torch::Tensor parameter : {model.first, model.second}) parameter.mutable_grad().zero_();
  }
}

TEST_P(GradientBucketsIn, AveragedTensorsBecomeTheBatchWeightedMeanOfTheRanks) {
  // Two identical ranks of local batch 3 each (the doubling collective): the sum of batch times
  // buffer over the ranks, divided by the global batch 6, is the buffer itself.
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 1);
  model.Backward();
  model.buckets.SetControl(std::vector<double>{6.0}, /*averaged_weight=*/3.0);
  model.buffer.fill_(-1.0F);  // what this rank held is overwritten, not added to
  ASSERT_TRUE(model.buckets.Finish().ok());
  model.buckets.WriteAveraged(6.0);
  EXPECT_TRUE(torch::equal(model.buffer, torch::tensor({2.0F, 6.0F})));
  EXPECT_EQ(model.buckets.SummedControl(), (std::vector<double>{12.0}));
}

TEST_P(GradientBucketsIn, AveragedTensorsOfMixedDtypesEachGetTheirOwnMeanIntegersRounded) {
  // A float, an integer counter and a float again (BatchNorm's order): the buffer groups them by
  // dtype, which must not mix up whose mean is whose. Two ranks of weight 3, total 7: 6x/7.
  torch::Tensor mean = torch::tensor({2.0F, 6.0F});
  torch::Tensor counter = torch::tensor({int64_t{3}, int64_t{10}});
  torch::Tensor variance = torch::tensor({7.0F});
  torch::Tensor weight = torch::ones({2}, torch::requires_grad());
  GradientBuckets buckets({weight}, /*bucket_elements=*/4, torch::Device(torch::kCPU),
                          {mean, counter, variance}, GetParam());
  DoublingCollective collective;
  buckets.BeginStep(collective, nullptr, 1);
  weight.sum().backward();
  buckets.SetControl(std::vector<double>{7.0}, /*averaged_weight=*/3.0);
  ASSERT_TRUE(buckets.Finish().ok());
  buckets.WriteAveraged(7.0);

  EXPECT_TRUE(torch::allclose(mean, torch::tensor({12.0F / 7, 36.0F / 7})));
  EXPECT_TRUE(torch::equal(counter, torch::tensor({int64_t{3}, int64_t{9}})));  // 2.57, 8.57
  EXPECT_TRUE(torch::allclose(variance, torch::tensor({6.0F})));
}

TEST_P(GradientBucketsIn, FinishWithoutControlValuesFailsInsteadOfWaitingForever) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 2);
  model.Backward();
  const Status status = model.buckets.Finish();
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kInternal);
}

TEST_P(GradientBucketsIn, ControlValuesOfTheWrongLengthFailTheStep) {
  DoublingCollective collective;
  model.buckets.BeginStep(collective, nullptr, 2);
  model.Backward();
  model.buckets.SetControl(std::vector<double>{1.0, 2.0, 3.0});
  EXPECT_FALSE(model.buckets.Finish().ok());
}

}  // namespace
}  // namespace fulcrum::trainer
