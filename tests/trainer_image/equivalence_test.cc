// Weighted aggregation is exact: 3 trainers with local batches {3, 5, 8} end with the same
// parameters as 1 trainer with batch 16 (20 steps, SGD with momentum, and AdamW with weight
// decay, warmup and cosine decay and gradient clipping that clips; MLP without BatchNorm),
// on synthetic data and on a packed uint8 image dataset normalised, cropped and flipped on the
// device (so a sample's augmentation does not depend on which rank reads it).
// All with gradient buckets all-reduced during backward (overlap). So is a step retried in
// micro-steps after running out of memory (the CPU twin of a GPU's out-of-memory error).
// Real processes, real Gloo over loopback (static groups, no coordinator).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "tests/trainer_image/data/packed_dataset_writer.h"
#include "tests/trainer_image/harness/checkpoint_reader.h"
#include "tests/trainer_image/harness/contract_models.h"
#include "tests/trainer_image/harness/local_job.h"

namespace fulcrum::testing {
namespace {

std::optional<Checkpoint> FinalCheckpoint(const std::string& directory) {
  return ReadCheckpointFile(directory + "/checkpoint-000000000020.bin");
}

// Every parameter after step 20, read from the checkpoint by its documented format.
std::vector<float> FinalParameters(const std::string& directory) {
  const std::optional<Checkpoint> checkpoint = FinalCheckpoint(directory);
  if (!checkpoint) return {};
  return checkpoint->Floats("parameter");
}

const CheckpointTensor* Find(const Checkpoint& checkpoint, const std::string& name) {
  for (const CheckpointTensor& tensor : checkpoint.tensors) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

double MaxDifference(const std::vector<float>& expected, const std::vector<float>& actual) {
  double max_difference = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    max_difference =
        std::max(max_difference, static_cast<double>(std::abs(actual[i] - expected[i])));
  }
  std::cout << "max |difference| = " << max_difference << " over " << expected.size()
            << " parameters\n";
  return max_difference;
}

std::vector<std::string> StaticTrainer(const std::string& directory, int rank, int world, int port,
                                       const std::string& batches) {
  return {TrainerBinary(), "--world-size", std::to_string(world), "--rank", std::to_string(rank),
          "--rendezvous", "127.0.0.1:" + std::to_string(port), "--batches", batches, "--steps",
          "20", "--model", "mlp", "--optimizer", "sgd", "--momentum", "0.9", "--lr", "0.05",
          "--checkpoint-dir", directory, "--collective-timeout-ms", "20000",
          // Small buckets (the MLP's 6922 gradients make 2), so that with overlap (the default)
          // the first bucket is all-reduced while backward is still running.
          "--bucket-elements", "1024"};
}

// Every rank ends bit-identical: parameters, and buffers (BatchNorm statistics) too.
void ExpectRanksBitIdentical(const std::string& directory, int ranks) {
  std::set<std::string> checksums, model_checksums;
  for (int rank = 0; rank < ranks; ++rank) {
    for (const auto& line :
         ReadJsonLines(directory + "/rank" + std::to_string(rank) + ".log", "finished")) {
      checksums.insert(line["checksum"].get<std::string>());
      model_checksums.insert(line["model_checksum"].get<std::string>());
    }
  }
  EXPECT_EQ(checksums.size(), 1u);
  EXPECT_EQ(model_checksums.size(), 1u);
}

void StartRanks(const std::string& directory, const std::vector<std::string>& extra) {
  const int port = FreeLoopbackPort();
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<std::string> args = StaticTrainer(directory, rank, 3, port, "3,5,8");
    args.insert(args.end(), extra.begin(), extra.end());
    ranks.emplace_back(args, directory + "/rank" + std::to_string(rank) + ".log");
  }
  for (int rank = 0; rank < 3; ++rank) {
    ASSERT_EQ(ranks[static_cast<std::size_t>(rank)].Wait(std::chrono::seconds(120)), 0)
        << ReadFile(directory + "/rank" + std::to_string(rank) + ".log");
  }
}

// Trains 1 rank with batch 16 and 3 ranks with {3, 5, 8}, each with `extra` flags, and expects
// the same parameters at the end, bit-identical ranks, and buckets all-reduced during backward.
// `multi_directory`, if given, is set to the 3 ranks' directory (logs rank0.log ...).
void ExpectThreeRanksMatchOne(const std::string& name, const std::vector<std::string>& extra,
                              std::string* multi_directory = nullptr) {
  const std::string single = FreshDirectory(name + "-single");
  const std::string multi = FreshDirectory(name + "-multi");
  if (multi_directory != nullptr) *multi_directory = multi;
  auto trainer = [&](const std::string& directory, int rank, int world, int port,
                     const std::string& batches) {
    std::vector<std::string> args = StaticTrainer(directory, rank, world, port, batches);
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  {
    ChildProcess one(trainer(single, 0, 1, FreeLoopbackPort(), "16"), single + "/rank0.log");
    ASSERT_EQ(one.Wait(std::chrono::seconds(120)), 0) << ReadFile(single + "/rank0.log");
  }
  StartRanks(multi, extra);
  if (::testing::Test::HasFatalFailure()) return;
  const std::vector<float> expected = FinalParameters(single);
  const std::vector<float> actual = FinalParameters(multi);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_LT(MaxDifference(expected, actual), 1e-5);

  // The gradients were all-reduced while backward ran: a bucket had started before it ended.
  const auto steps = ReadJsonLines(multi + "/rank0.log", "step");
  ASSERT_FALSE(steps.empty());
  for (const auto& step : steps) EXPECT_GE(step["overlapped_buckets"].get<int>(), 1) << step;

  ExpectRanksBitIdentical(multi, 3);
}

TEST(TrainerEquivalence, ThreeUnequalBatchesMatchOneTrainerWithTheGlobalBatch) {
  ExpectThreeRanksMatchOne("equivalence", {});
}

TEST(TrainerEquivalence, ThreeUnequalBatchesMatchOneWithAdamWWarmupCosineAndClipping) {
  std::string multi;
  ExpectThreeRanksMatchOne(
      "equivalence-adamw",
      {"--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.05", "--clip-grad-norm", "0.05",
       "--lr-schedule", "cosine", "--warmup-steps", "5", "--lr-final-factor", "0.1"},
      &multi);
  // The clipping really clipped: the aggregated gradient's norm was above 0.05.
  const auto steps = ReadJsonLines(multi + "/rank0.log", "step");
  ASSERT_FALSE(steps.empty());
  for (const auto& step : steps) EXPECT_TRUE(step["clipped"].get<bool>()) << step;
  // The rate followed the schedule (logged every 10 steps): 1/5 of 0.01 at step 0 in warmup;
  // at step 10, 5 of the cosine's 15 steps down from 0.01 towards 0.001.
  ASSERT_GE(steps.size(), 2u);
  EXPECT_NEAR(steps[0]["learning_rate"].get<double>(), 0.002, 1e-12);
  EXPECT_EQ(steps[1]["step"], 10);
  EXPECT_NEAR(steps[1]["learning_rate"].get<double>(),
              0.01 * (0.1 + 0.9 * 0.5 * (1 + std::cos(3.141592653589793 * 5 / 14))), 1e-12);
}

TEST(TrainerEquivalence, ThreeUnequalBatchesMatchOneOnAPackedImageDatasetWithTransforms) {
  // 64 uint8 images [3, 4, 4]; the class is which channel is brightest, so the task is learnable.
  constexpr int64_t kSamples = 64;
  std::vector<uint8_t> pixels(kSamples * 48);
  std::vector<int64_t> labels(kSamples);
  uint64_t state = 12345;
  for (int64_t s = 0; s < kSamples; ++s) {
    labels[static_cast<std::size_t>(s)] = s % 3;
    for (int64_t i = 0; i < 48; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const int channel = static_cast<int>(i / 16);
      const int base = channel == s % 3 ? 140 : 40;
      pixels[static_cast<std::size_t>(s * 48 + i)] = static_cast<uint8_t>(base + (state >> 58));
    }
  }
  std::vector<TestField> fields(2);
  fields[0].name = "image", fields[0].dtype = "uint8", fields[0].shape = {3, 4, 4};
  fields[0].data = BytesOf(pixels);
  fields[1].name = "label", fields[1].dtype = "int64", fields[1].data = BytesOf(labels);
  fields[1].classes = 3;
  const std::string dataset = FreshDirectory("equivalence-packed-data");
  WritePackedDataset(dataset, kSamples, fields);
  // 20 steps of 16 are 5 epochs of 64: shuffled anew each epoch, augmented anew each epoch.
  ExpectThreeRanksMatchOne("equivalence-packed",
                           {"--dataset", dataset, "--input-features", "48", "--classes", "3",
                            "--normalize-mean", "0.35,0.3,0.25", "--normalize-std", "0.2,0.25,0.3",
                            "--random-crop-padding", "1", "--horizontal-flip", "true"});
}

// The model contract (docs/user-guide.md): forward takes two named fields of a packed dataset
// (token ids, a mask), the module's own loss method sums over the batch, and its embedding is
// frozen. AdamW with weight decay, warmup and cosine decay, and clipping that clips.
TEST(TrainerEquivalence, ThreeRanksMatchOneWithNamedInputsAnOwnLossAndAFrozenLayer) {
  const std::string& models = ContractModels();
  ASSERT_FALSE(models.empty());
  std::string multi;
  ExpectThreeRanksMatchOne(
      "equivalence-contract",
      {"--model", "torchscript", "--torchscript", models + "/two_inputs.pt", "--dataset",
       models + "/data", "--optimizer", "adamw", "--lr", "0.05", "--weight-decay", "0.05",
       "--clip-grad-norm", "0.3", "--lr-schedule", "cosine", "--warmup-steps", "5"},
      &multi);
  const auto steps = ReadJsonLines(multi + "/rank0.log", "step");
  ASSERT_FALSE(steps.empty());
  EXPECT_TRUE(steps.front()["clipped"].get<bool>()) << steps.front();
  const auto started = ReadJsonLines(multi + "/rank0.log", "started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started.front()["frozen_parameters"], 1);
  EXPECT_TRUE(started.front()["custom_loss"].get<bool>());
  // The frozen embedding is exactly what the module was saved with: 0.01 * arange.
  const std::optional<Checkpoint> checkpoint = FinalCheckpoint(multi);
  ASSERT_TRUE(checkpoint);
  const CheckpointTensor* embedding = Find(*checkpoint, "embed.weight");
  ASSERT_NE(embedding, nullptr);
  const std::vector<float> values = embedding->AsFloats();
  ASSERT_EQ(values.size(), 160u);
  for (std::size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(values[i], 0.01f * static_cast<float>(i)) << i;
  // Neither all-reduced nor updated: no optimizer state for it.
  EXPECT_EQ(Find(*checkpoint, "exp_avg/embed.weight"), nullptr);
  EXPECT_NE(Find(*checkpoint, "exp_avg/hidden.weight"), nullptr);
}

TEST(TrainerEquivalence, ThreeRanksMatchOneWhenForwardTakesOneDictOfFields) {
  const std::string& models = ContractModels();
  ASSERT_FALSE(models.empty());
  ExpectThreeRanksMatchOne("equivalence-dict",
                           {"--model", "torchscript", "--torchscript", models + "/dict_input.pt",
                            "--dataset", models + "/data", "--lr", "0.1"});
}

// BatchNorm normalises by each rank's own batch, as DDP does (no SyncBatchNorm), so 3 ranks do
// not equal 1; but the running statistics are averaged weighted by b_i every step, so the
// ranks stay bit-identical, buffers included, and the statistics move.
TEST(TrainerEquivalence, ThreeRanksOfABatchNormModelStayBitIdenticalBuffersIncluded) {
  const std::string& models = ContractModels();
  ASSERT_FALSE(models.empty());
  const std::string multi = FreshDirectory("equivalence-batchnorm");
  StartRanks(multi, {"--model", "torchscript", "--torchscript", models + "/batchnorm.pt",
                     "--dataset", models + "/data", "--lr", "0.1"});
  if (HasFatalFailure()) return;
  ExpectRanksBitIdentical(multi, 3);
  const std::optional<Checkpoint> checkpoint = FinalCheckpoint(multi);
  ASSERT_TRUE(checkpoint);
  const CheckpointTensor* running_mean = Find(*checkpoint, "norm.running_mean");
  ASSERT_NE(running_mean, nullptr);
  EXPECT_EQ(running_mean->group, "buffer");
  double moved = 0.0;
  for (float value : running_mean->AsFloats()) moved += std::abs(value);
  EXPECT_GT(moved, 0.0);
  const CheckpointTensor* tracked = Find(*checkpoint, "norm.num_batches_tracked");
  ASSERT_NE(tracked, nullptr);
  int64_t batches = 0;
  std::memcpy(&batches, tracked->bytes.data(), sizeof batches);
  EXPECT_EQ(batches, 20);  // one per step on every rank
}

// float16 with dynamic loss scaling, started at a scale that overflows: the overflowing steps
// are skipped by every rank alike (the decision is taken from the all-reduced gradient every rank
// holds), the scale halves until it fits, and 3 ranks still match 1. On a CPU the computation
// stays float32 (libtorch's CPU autocast has no float16): what is tested is the scaling.
TEST(TrainerEquivalence, ThreeRanksMatchOneWithLossScalingThroughAnOverflow) {
  std::string multi;
  ExpectThreeRanksMatchOne("equivalence-fp16",
                           {"--precision", "fp16", "--initial-loss-scale", "3e38"}, &multi);
  std::set<std::vector<int64_t>> skipped_steps;
  for (int rank = 0; rank < 3; ++rank) {
    std::vector<int64_t> steps;
    for (const auto& line :
         ReadJsonLines(multi + "/rank" + std::to_string(rank) + ".log",
                       "gradient overflow: the update is skipped on every rank, the loss scale "
                       "halved")) {
      steps.push_back(line["step"].get<int64_t>());
    }
    EXPECT_FALSE(steps.empty()) << "rank " << rank << " saw no overflow";
    skipped_steps.insert(steps);
  }
  EXPECT_EQ(skipped_steps.size(), 1u) << "ranks skipped different steps";
}

// The CNN has BatchNorm, so 3 ranks are compared with 3 (same splits), not with 1: channels_last
// changes the convolution kernels, not the training, and the ranks stay bit-identical.
TEST(TrainerEquivalence, ChannelsLastConvolutionsTrainAsContiguousOnesOnThreeRanks) {
  const std::vector<std::string> cnn = {"--model", "cnn", "--image-size", "8", "--hidden", "8"};
  std::vector<std::string> nhwc = cnn;
  nhwc.insert(nhwc.end(), {"--channels-last", "true"});
  const std::string contiguous = FreshDirectory("equivalence-nchw");
  const std::string channels_last = FreshDirectory("equivalence-nhwc");
  StartRanks(contiguous, cnn);
  StartRanks(channels_last, nhwc);
  if (HasFatalFailure()) return;
  ExpectRanksBitIdentical(channels_last, 3);
  const std::vector<float> expected = FinalParameters(contiguous);
  const std::vector<float> actual = FinalParameters(channels_last);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_LT(MaxDifference(expected, actual), 1e-5);
}

// One rank, the small CNN, 20 steps: bfloat16 autocast ends within 0.05 of float32 in every
// parameter (measured 0.022); float16's loss scaling with a power-of-two scale is exact on a
// CPU's float32 compute; channels_last within 1e-5 (other convolution kernels).
TEST(TrainerEquivalence, MixedPrecisionEndsWithinAStatedToleranceOfFloat32) {
  auto train = [](const std::string& name, const std::vector<std::string>& extra) {
    const std::string directory = FreshDirectory(name);
    std::vector<std::string> args = StaticTrainer(directory, 0, 1, FreeLoopbackPort(), "16");
    args.insert(args.end(), {"--model", "cnn", "--image-size", "8", "--hidden", "8"});
    args.insert(args.end(), extra.begin(), extra.end());
    ChildProcess one(args, directory + "/rank0.log");
    EXPECT_EQ(one.Wait(std::chrono::seconds(120)), 0) << ReadFile(directory + "/rank0.log");
    return FinalParameters(directory);
  };
  const std::vector<float> float32 = train("precision-fp32", {});
  const std::vector<float> bfloat16 = train("precision-bf16", {"--precision", "bf16"});
  const std::vector<float> float16 = train("precision-fp16", {"--precision", "fp16"});
  const std::vector<float> channels_last = train("precision-nhwc", {"--channels-last", "true"});
  ASSERT_FALSE(float32.empty());
  for (const auto* other : {&bfloat16, &float16, &channels_last})
    ASSERT_EQ(other->size(), float32.size());
  const double bfloat16_difference = MaxDifference(float32, bfloat16);
  EXPECT_GT(bfloat16_difference, 0.0) << "bfloat16 autocast changed nothing: not engaged?";
  EXPECT_LT(bfloat16_difference, 0.05);
  EXPECT_LT(MaxDifference(float32, float16), 1e-6);
  EXPECT_LT(MaxDifference(float32, channels_last), 1e-5);
}

TEST(TrainerEquivalence, AStepThatRunsOutOfMemoryIsRetriedInMicroStepsToTheSameResult) {
  const std::string whole = FreshDirectory("equivalence-whole");
  const std::string split = FreshDirectory("equivalence-out-of-memory");
  {
    ChildProcess one(StaticTrainer(whole, 0, 1, FreeLoopbackPort(), "16"), whole + "/rank0.log");
    ASSERT_EQ(one.Wait(std::chrono::seconds(120)), 0) << ReadFile(whole + "/rank0.log");
  }
  {
    std::vector<std::string> args = StaticTrainer(split, 0, 1, FreeLoopbackPort(), "16");
    args.insert(args.end(), {"--emulated-max-micro-batch", "5"});
    ChildProcess one(args, split + "/rank0.log");
    ASSERT_EQ(one.Wait(std::chrono::seconds(120)), 0) << ReadFile(split + "/rank0.log");
  }
  // 16 fails, then 8; 4 fits. The next step tries 6 (16 in 3) and settles on micro-batches <= 5.
  const auto retries = ReadJsonLines(split + "/rank0.log",
                                     "out of memory: retrying the step in smaller micro-steps");
  ASSERT_GE(retries.size(), 2u) << ReadFile(split + "/rank0.log");
  EXPECT_EQ(retries.front()["failed_micro_batch"], 16);
  EXPECT_EQ(retries.front()["micro_steps"], 2);
  for (const auto& retry : retries)
    EXPECT_LT(retry["step"].get<int>(), 2);  // learned, not repeated
  const std::vector<float> expected = FinalParameters(whole);
  const std::vector<float> actual = FinalParameters(split);
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_LT(MaxDifference(expected, actual), 1e-5);
}

}  // namespace
}  // namespace fulcrum::testing
