#include "common/token_bucket.h"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TokenBucket::TimePoint kStart{seconds(1000)};

TEST(TokenBucket, AFullBucketGivesItsBurstThenRefusesUntilRefilled) {
  TokenBucket bucket(/*per_second=*/1.0, /*burst=*/3, kStart);
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_FALSE(bucket.TryTake(kStart));
  EXPECT_FALSE(bucket.TryTake(kStart + milliseconds(500)));
  EXPECT_TRUE(bucket.TryTake(kStart + milliseconds(1000)));
}

TEST(TokenBucket, ReservationsQueueUpOneRefillApart) {
  TokenBucket bucket(/*per_second=*/0.1, /*burst=*/1, kStart);
  EXPECT_EQ(bucket.Reserve(kStart), TokenBucket::Duration::zero());
  EXPECT_EQ(bucket.Reserve(kStart), seconds(10));
  EXPECT_EQ(bucket.Reserve(kStart), seconds(20));
  // Once the reserved tokens are due, the bucket is empty, not in debt.
  EXPECT_FALSE(bucket.TryTake(kStart + seconds(20)));
  EXPECT_TRUE(bucket.TryTake(kStart + seconds(30)));
}

TEST(TokenBucket, RefillsNoHigherThanTheBurst) {
  TokenBucket bucket(/*per_second=*/10.0, /*burst=*/2, kStart);
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_FALSE(bucket.IsFull(kStart));
  EXPECT_TRUE(bucket.IsFull(kStart + seconds(3600)));
  EXPECT_TRUE(bucket.TryTake(kStart + seconds(3600)));
  EXPECT_TRUE(bucket.TryTake(kStart + seconds(3600)));
  EXPECT_FALSE(bucket.TryTake(kStart + seconds(3600)));
}

TEST(TokenBucket, ATimeBeforeTheLastRefillAddsNothing) {
  TokenBucket bucket(/*per_second=*/1.0, /*burst=*/1, kStart);
  EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_FALSE(bucket.TryTake(kStart - seconds(5)));
  EXPECT_FALSE(bucket.TryTake(kStart + milliseconds(500)));
}

TEST(TokenBucket, NoRateMeansUnlimited) {
  TokenBucket bucket(/*per_second=*/0, /*burst=*/1, kStart);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(bucket.TryTake(kStart));
  EXPECT_EQ(bucket.Reserve(kStart), TokenBucket::Duration::zero());
  EXPECT_TRUE(bucket.IsFull(kStart));
}

}  // namespace
}  // namespace fulcrum
