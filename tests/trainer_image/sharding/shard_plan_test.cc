// The shard plan of sharded data parallel: contiguous, unequal, proportional shards, and where
// a new generation takes each piece of the state from.
#include "trainer_image/trainer/sharding/shard_plan.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace fulcrum::trainer {
namespace {

std::vector<ShardRange> Plan(int64_t elements, std::vector<double> weights, int64_t alignment) {
  Result<std::vector<ShardRange>> plan = PlanShards(elements, weights, alignment);
  EXPECT_TRUE(plan.ok()) << plan.error().ToString();
  return plan.ok() ? *plan : std::vector<ShardRange>{};
}

TEST(PlanShards, SizesEachRanksShardByItsWeightNotEqually) {
  // 80 GB, 16 GB and 16 GB GPUs: the large one holds 80/112 of the state.
  const std::vector<ShardRange> plan = Plan(1120, {80, 16, 16}, 1);
  EXPECT_EQ(plan, (std::vector<ShardRange>{{0, 800}, {800, 960}, {960, 1120}}));
}

TEST(PlanShards, CoversTheWholeSpaceContiguouslyWithBoundariesOnTheAlignment) {
  const std::vector<ShardRange> plan = Plan(6922, {3, 5, 8}, 16);
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan.front().begin, 0);
  EXPECT_EQ(plan.back().end, 6922);
  for (std::size_t rank = 0; rank + 1 < plan.size(); ++rank) {
    EXPECT_EQ(plan[rank].end, plan[rank + 1].begin);
    EXPECT_EQ(plan[rank].end % 16, 0);
  }
  // Each within one alignment of its exact share.
  const double exact[] = {6922.0 * 3 / 16, 6922.0 * 5 / 16, 6922.0 * 8 / 16};
  for (std::size_t rank = 0; rank < plan.size(); ++rank)
    EXPECT_NEAR(static_cast<double>(plan[rank].size()), exact[rank], 16.0) << rank;
}

TEST(PlanShards, ARankOfWeightZeroHoldsNothingAndTheLastHolderEndsTheSpace) {
  EXPECT_EQ(Plan(100, {1, 0, 1}, 1), (std::vector<ShardRange>{{0, 50}, {50, 50}, {50, 100}}));
  EXPECT_EQ(Plan(100, {1, 1, 0}, 1), (std::vector<ShardRange>{{0, 50}, {50, 100}, {100, 100}}));
  // Off the alignment too: the last holder ends at the last element, not at a multiple of 16.
  EXPECT_EQ(Plan(100, {1, 1, 0}, 16), (std::vector<ShardRange>{{0, 48}, {48, 100}, {100, 100}}));
}

TEST(PlanShards, ASpaceSmallerThanTheAlignmentGoesWholeToTheLastHolder) {
  EXPECT_EQ(Plan(10, {1, 1}, 16), (std::vector<ShardRange>{{0, 0}, {0, 10}}));
  EXPECT_EQ(Plan(0, {1, 1}, 16), (std::vector<ShardRange>{{0, 0}, {0, 0}}));
}

TEST(PlanShards, RefusesWeightsThatCannotPlanAndNamesThem) {
  const std::vector<double> none;
  EXPECT_EQ(PlanShards(10, none).error().field, "shard weights");
  const std::vector<double> negative = {1, -1};
  EXPECT_EQ(PlanShards(10, negative).error().field, "shard weights");
  const std::vector<double> not_finite = {1, std::numeric_limits<double>::infinity()};
  EXPECT_EQ(PlanShards(10, not_finite).error().field, "shard weights");
  const std::vector<double> zeros = {0, 0};
  EXPECT_EQ(PlanShards(10, zeros).error().field, "shard weights");
  const std::vector<double> fine = {1};
  EXPECT_EQ(PlanShards(-1, fine).error().field, "elements");
  EXPECT_EQ(PlanShards(10, fine, 0).error().field, "alignment");
}

TEST(SourcesFor, TakesEachPieceFromTheRankThatHeldItUnderTheOldPlan) {
  // Old plan {0-40, 40-100}: the two members hand their shards over.
  const std::vector<ShardRange> held = {{0, 40}, {40, 100}};
  EXPECT_EQ(SourcesFor(100, held), (std::vector<ShardSource>{{0, {0, 40}}, {1, {40, 100}}}));
}

TEST(SourcesFor, PrefersTheLowestRankHoldingAPieceAndMergesNeighbours) {
  // Rank 1 kept everything (it resumed from a checkpoint); rank 0 holds a shard; rank 2 is new.
  const std::vector<ShardRange> held = {{30, 60}, {0, 100}, {}};
  EXPECT_EQ(SourcesFor(100, held),
            (std::vector<ShardSource>{{1, {0, 30}}, {0, {30, 60}}, {1, {60, 100}}}));
}

TEST(SourcesFor, NamesThePiecesNoRankHoldsAsLost) {
  // The rank that held 40-70 left without handing it over.
  const std::vector<ShardRange> held = {{0, 40}, {70, 100}};
  EXPECT_EQ(SourcesFor(100, held),
            (std::vector<ShardSource>{{0, {0, 40}}, {-1, {40, 70}}, {1, {70, 100}}}));
  EXPECT_TRUE(SourcesFor(0, held).empty());
}

}  // namespace
}  // namespace fulcrum::trainer
