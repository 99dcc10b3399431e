// Input transforms on the device: uint8 images become normalised floats, and a sample's random
// crop and flip depend only on (seed, epoch, sample index), not on which worker or batch drew it.
#include "trainer_image/trainer/data/device_transform.h"

#include <gtest/gtest.h>

namespace fulcrum::trainer {
namespace {

const std::vector<int64_t> kImage = {3, 6, 6};

torch::Tensor Images(int64_t count) {
  return torch::arange(count * 3 * 6 * 6, torch::kInt64)
      .remainder(251)
      .to(torch::kUInt8)
      .view({count, 3, 6, 6});
}

TEST(DeviceTransform, CastsScalesAndNormalisesPerChannel) {
  TransformOptions options;
  options.mean = {0.5, 0.25, 0.0};
  options.std = {0.5, 0.25, 2.0};
  const Result<DeviceTransform> transform = DeviceTransform::Make(options, kImage, torch::kUInt8);
  ASSERT_TRUE(transform.ok()) << transform.error().ToString();
  const torch::Tensor images = Images(2);
  const std::vector<int64_t> indices = {0, 1};
  const torch::Tensor out = transform->Apply(images, indices, 0, 10);
  ASSERT_EQ(out.scalar_type(), torch::kFloat32);
  const torch::Tensor scaled = images.to(torch::kFloat32) / 255.0;
  const torch::Tensor mean = torch::tensor({0.5, 0.25, 0.0}).view({1, 3, 1, 1});
  const torch::Tensor std = torch::tensor({0.5, 0.25, 2.0}).view({1, 3, 1, 1});
  EXPECT_TRUE(torch::allclose(out, (scaled - mean) / std, 1e-5, 1e-6));
}

TEST(DeviceTransform, ASampleIsAugmentedTheSameWhicheverBatchHoldsIt) {
  TransformOptions options;
  options.crop_padding = 2;
  options.horizontal_flip = true;
  options.seed = 7;
  const Result<DeviceTransform> transform = DeviceTransform::Make(options, kImage, torch::kUInt8);
  ASSERT_TRUE(transform.ok()) << transform.error().ToString();
  const torch::Tensor images = Images(8);
  const std::vector<int64_t> indices = {10, 11, 12, 13, 14, 15, 16, 17};
  // One worker reads all 8 at positions 100..107; another reads samples 13 and 14 alone.
  const torch::Tensor whole = transform->Apply(images, indices, 100, 1000);
  const torch::Tensor part = transform->Apply(images.slice(0, 3, 5), {&indices[3], 2}, 103, 1000);
  EXPECT_TRUE(torch::equal(whole.slice(0, 3, 5), part));
  // The same sample in another epoch is augmented differently (for some sample of the batch).
  const torch::Tensor next_epoch = transform->Apply(images, indices, 1100, 1000);
  EXPECT_FALSE(torch::equal(whole, next_epoch));
  // Crops and flips move pixels but keep the shape; some samples differ from the original.
  EXPECT_EQ(whole.sizes(), images.sizes());
  EXPECT_FALSE(torch::equal(whole, images.to(torch::kFloat32) / 255.0));
}

TEST(DeviceTransform, AFlipWithoutCropMirrorsTheImageOrLeavesIt) {
  TransformOptions options;
  options.horizontal_flip = true;
  options.scale = 1.0;
  const Result<DeviceTransform> transform = DeviceTransform::Make(options, kImage, torch::kUInt8);
  ASSERT_TRUE(transform.ok());
  const torch::Tensor images = Images(16);
  std::vector<int64_t> indices(16);
  for (int64_t i = 0; i < 16; ++i) indices[static_cast<std::size_t>(i)] = i;
  const torch::Tensor out = transform->Apply(images, indices, 0, 16);
  int flipped = 0;
  for (int64_t i = 0; i < 16; ++i) {
    const torch::Tensor original = images[i].to(torch::kFloat32);
    if (torch::equal(out[i], original.flip({2}))) {
      ++flipped;
    } else {
      EXPECT_TRUE(torch::equal(out[i], original)) << "sample " << i;
    }
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, 16);
}

TEST(DeviceTransform, LeavesItsInputAloneSoARetriedStepGetsTheSameBatch) {
  TransformOptions options;
  options.mean = {0.5, 0.25, 0.0};
  options.std = {0.5, 0.25, 2.0};
  const Result<DeviceTransform> transform = DeviceTransform::Make(options, kImage, torch::kFloat32);
  ASSERT_TRUE(transform.ok());
  const torch::Tensor inputs = torch::rand({2, 3, 6, 6});
  const torch::Tensor original = inputs.clone();
  const std::vector<int64_t> indices = {0, 1};
  const torch::Tensor first = transform->Apply(inputs, indices, 0, 10);
  EXPECT_TRUE(torch::equal(inputs, original));
  EXPECT_TRUE(torch::equal(transform->Apply(inputs, indices, 0, 10), first));
}

TEST(DeviceTransform, RefusesOptionsThatDoNotFitTheSamplesNamingTheFlag) {
  TransformOptions options;
  options.mean = {0.5, 0.5};
  options.std = {0.2, 0.2};
  EXPECT_EQ(DeviceTransform::Make(options, kImage, torch::kUInt8).error().field,
            "--normalize-mean");
  options.mean = {0.5, 0.5, 0.5};
  EXPECT_EQ(DeviceTransform::Make(options, kImage, torch::kUInt8).error().field, "--normalize-std");
  TransformOptions crop;
  crop.crop_padding = 4;
  EXPECT_EQ(DeviceTransform::Make(crop, std::vector<int64_t>{32}, torch::kFloat32).error().field,
            "--random-crop-padding");
}

}  // namespace
}  // namespace fulcrum::trainer
