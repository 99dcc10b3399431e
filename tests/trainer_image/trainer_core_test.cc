// The torch-free core of the trainer: sharding by prefix sums, epoch orders, flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "trainer_image/trainer/data/sample_order.h"
#include "trainer_image/trainer/trainer_flags.h"

namespace fulcrum::trainer {
namespace {

TEST(ShardForRank, CutsTheStepByPrefixSumsOfThePlan) {
  const std::vector<int> plan = {3, 5, 8};
  EXPECT_EQ(ShardForRank(100, plan, 0)->begin, 100);
  EXPECT_EQ(ShardForRank(100, plan, 0)->end, 103);
  EXPECT_EQ(ShardForRank(100, plan, 1)->begin, 103);
  EXPECT_EQ(ShardForRank(100, plan, 1)->end, 108);
  EXPECT_EQ(ShardForRank(100, plan, 2)->begin, 108);
  EXPECT_EQ(ShardForRank(100, plan, 2)->end, 116);
}

TEST(ShardForRank, RejectsARankOutsideThePlan) {
  const std::vector<int> plan = {3, 5};
  EXPECT_EQ(ShardForRank(0, plan, 2).error().field, "rank");
  EXPECT_EQ(ShardForRank(-1, plan, 0).error().field, "cursor");
}

TEST(SampleOrder, EveryEpochIsAPermutationAndEpochsDiffer) {
  SampleOrder order(101, 7, true);
  const std::vector<int64_t> first = order.Indices({0, 101});
  const std::vector<int64_t> second = order.Indices({101, 202});
  for (const auto& epoch : {first, second}) {
    std::vector<int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expected(101);
    std::iota(expected.begin(), expected.end(), 0);
    EXPECT_EQ(sorted, expected);
  }
  EXPECT_NE(first, second);
}

TEST(SampleOrder, StepsAcrossAnEpochBoundaryAndChangingPlansUseEachSampleOncePerEpoch) {
  SampleOrder order(50, 3, true);
  std::vector<int> seen(50, 0);
  int64_t cursor = 0;
  const std::vector<std::vector<int>> plans = {{3, 4}, {7}, {1, 2, 5}, {0, 6}};
  for (int step = 0; cursor < 100; ++step) {
    const std::vector<int>& plan = plans[static_cast<std::size_t>(step) % plans.size()];
    for (int rank = 0; rank < static_cast<int>(plan.size()); ++rank) {
      PositionRange range = *ShardForRank(cursor, plan, rank);
      range.end = std::min<int64_t>(range.end, 100);
      for (int64_t index : order.Indices(range)) ++seen[static_cast<std::size_t>(index)];
    }
    cursor += std::accumulate(plan.begin(), plan.end(), 0);
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 2; }));
}

TEST(TrainerFlags, NamesTheFlagThatIsWrong) {
  EXPECT_EQ(
      ParseTrainerFlags({"--world-size", "2", "--rank", "0", "--rendezvous", "h:1"}).error().field,
      "--batches");
  EXPECT_EQ(ParseTrainerFlags({"--coordinator", "h:1"}).error().field, "--token-file");
  EXPECT_EQ(
      ParseTrainerFlags({"--coordinator", "h:1", "--token-file", "t", "--lr", "x"}).error().field,
      "--lr");
  EXPECT_EQ(ParseTrainerFlags({"--coordinator", "h:1", "--token-file", "t", "--coordinator-ca",
                               "ca.crt", "--emulated-slowdown", "0.5"})
                .error()
                .field,
            "--emulated-slowdown");
  EXPECT_EQ(ParseTrainerFlags({"--bogus", "1"}).error().field, "--bogus");
}

TEST(TrainerFlags, AFlagGivenTwiceTakesItsLastValueSoAJobsArgsOverrideTheOperators) {
  const Result<TrainerConfig> config = ParseTrainerFlags(
      {"--world-size", "3", "--rank", "1", "--rendezvous", "h:1", "--batches", "1,1,1", "--steps",
       "600", "--batches", "3,5,8", "--steps", "20", "--normalize-mean", "0.5,0.25"});
  ASSERT_TRUE(config.ok()) << config.error().ToString();
  EXPECT_EQ(config->batches, (std::vector<int>{3, 5, 8}));
  EXPECT_EQ(config->steps, 20);
  EXPECT_EQ(config->transform.mean, (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(ParseTrainerFlags({"--batches", "3,x"}).error().field, "--batches");
}

TEST(TrainerFlags, HelpIsGeneratedWithEveryFlagAndItsDefault) {
  const Result<TrainerConfig> help = ParseTrainerFlags({"--help"});
  ASSERT_FALSE(help.ok());
  EXPECT_EQ(help.error().field, "--help");
  for (const char* flag : {"--dataset", "--loader-threads", "--normalize-mean", "--epochs",
                           "--lr-schedule", "--clip-grad-norm", "--emulated-slowdown"}) {
    EXPECT_NE(help.error().message.find(flag), std::string::npos) << flag;
  }
  EXPECT_NE(help.error().message.find("{sgd,adam,adamw}"), std::string::npos)
      << help.error().message;
}

TEST(TrainerFlags, TheCoordinatorLinkIsTlsUnlessPlaintextIsAskedForByName) {
  const std::vector<std::string> base = {"--coordinator", "h:1", "--token-file", "t"};
  const Error neither = ParseTrainerFlags(base).error();
  EXPECT_EQ(neither.field, "--coordinator-ca");
  EXPECT_NE(neither.message.find("--coordinator-insecure true"), std::string::npos);
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return ParseTrainerFlags(more);
  };
  const Result<TrainerConfig> tls = with({"--coordinator-ca", "/var/run/fulcrum/token/ca.crt"});
  ASSERT_TRUE(tls.ok());
  EXPECT_EQ(tls->coordinator_ca, "/var/run/fulcrum/token/ca.crt");
  EXPECT_TRUE(with({"--coordinator-insecure", "true"})->coordinator_insecure);
  EXPECT_EQ(with({"--coordinator-insecure", "true", "--coordinator-ca", "c"}).error().field,
            "--coordinator-ca");
  EXPECT_EQ(with({"--coordinator-insecure", "yes"}).error().field, "--coordinator-insecure");
}

TEST(TrainerFlags, SlowdownFileDefaultsToTheEnvironmentsAndAFlagOverridesIt) {
  const std::vector<std::string> base = {"--coordinator",          "h:1", "--token-file", "t",
                                         "--coordinator-insecure", "true"};
  EXPECT_EQ(ParseTrainerFlags(base)->slowdown_file, "");
  const std::map<std::string, std::string> environment = {
      {"FULCRUM_SLOWDOWN_FILE", "/node/slowdown"}};
  EXPECT_EQ(ParseTrainerFlags(base, environment)->slowdown_file, "/node/slowdown");
  std::vector<std::string> overridden = base;
  overridden.insert(overridden.end(), {"--slowdown-file", "/mine"});
  EXPECT_EQ(ParseTrainerFlags(overridden, environment)->slowdown_file, "/mine");
}

TEST(TrainerFlags, TheImageComesFromTheOperatorsEnvironment) {
  const std::vector<std::string> base = {"--coordinator",          "h:1", "--token-file", "t",
                                         "--coordinator-insecure", "true"};
  EXPECT_EQ(ParseTrainerFlags(base)->image, "");
  EXPECT_EQ(ParseTrainerFlags(base, {{"FULCRUM_IMAGE", "fulcrum-trainer-cuda:0.1"}})->image,
            "fulcrum-trainer-cuda:0.1");
}

TEST(TrainerFlags, DeviceAndCollectiveDefaultToAutoAndRejectNcclOnTheCpu) {
  const std::vector<std::string> base = {"--coordinator",    "h:1",   "--token-file", "t",
                                         "--coordinator-ca", "ca.crt"};
  const Result<TrainerConfig> defaults = ParseTrainerFlags(base);
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->device, DeviceKind::kAuto);
  EXPECT_EQ(defaults->collective, CollectiveKind::kAuto);
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return ParseTrainerFlags(args);
  };
  EXPECT_EQ(with({"--device", "cuda", "--collective", "nccl"})->collective, CollectiveKind::kNccl);
  EXPECT_EQ(with({"--device", "gpu"}).error().field, "--device");
  EXPECT_EQ(with({"--collective", "mpi"}).error().field, "--collective");
  EXPECT_EQ(with({"--device", "cpu", "--collective", "nccl"}).error().field, "--collective");
  EXPECT_EQ(with({"--device-index", "-1"}).error().field, "--device-index");
  EXPECT_EQ(with({"--emulated-max-micro-batch", "-2"}).error().field, "--emulated-max-micro-batch");
  EXPECT_EQ(with({"--model", "resnet18"})->model.kind, ModelKind::kResNet18);
}

}  // namespace
}  // namespace fulcrum::trainer
