#include "common/backoff.h"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

const BackoffPolicy kPolicy{.initial = milliseconds(100), .max = milliseconds(1000)};

TEST(BackoffPolicy, DelayDoublesFromInitialAndStopsAtTheCap) {
  EXPECT_EQ(kPolicy.DelayAt(0), milliseconds(100));
  EXPECT_EQ(kPolicy.DelayAt(1), milliseconds(200));
  EXPECT_EQ(kPolicy.DelayAt(3), milliseconds(800));
  EXPECT_EQ(kPolicy.DelayAt(4), milliseconds(1000));
  EXPECT_EQ(kPolicy.DelayAt(5), milliseconds(1000));
}

TEST(BackoffPolicy, AVeryLongRunOfFailuresSaturatesAtTheCapInsteadOfOverflowing) {
  EXPECT_EQ(kPolicy.DelayAt(64), milliseconds(1000));
  EXPECT_EQ(kPolicy.DelayAt(100'000), milliseconds(1000));
}

TEST(BackoffPolicy, AnInitialDelayAboveTheCapIsCapped) {
  const BackoffPolicy policy{.initial = milliseconds(5000), .max = milliseconds(1000)};
  EXPECT_EQ(policy.DelayAt(0), milliseconds(1000));
}

TEST(BackoffPolicy, OtherFactorsGrowByThatFactor) {
  const BackoffPolicy policy{
      .initial = milliseconds(100), .max = milliseconds(10'000), .factor = 3};
  EXPECT_EQ(policy.DelayAt(2), milliseconds(900));
}

TEST(Backoff, WithoutJitterWaitsDoubleUpToTheCap) {
  Backoff backoff(kPolicy);
  for (const int expected : {100, 200, 400, 800, 1000, 1000}) {
    EXPECT_EQ(backoff.Next(), milliseconds(expected));
  }
}

TEST(Backoff, ResetStartsAgainFromTheInitialDelay) {
  Backoff backoff(kPolicy);
  (void)backoff.Next();
  (void)backoff.Next();
  backoff.Reset();
  EXPECT_EQ(backoff.Next(), milliseconds(100));
  EXPECT_EQ(backoff.Next(), milliseconds(200));
}

TEST(Backoff, JitteredWaitsStayWithinTheRangeAndNeverExceedTheCap) {
  BackoffPolicy policy = kPolicy;
  policy.jitter_low = 0.75;
  policy.jitter_high = 1.25;
  Backoff backoff(policy, /*seed=*/7);
  for (int attempt = 0; attempt < 200; ++attempt) {
    const nanoseconds delay = policy.DelayAt(attempt);
    const milliseconds wait = backoff.Next();  // cut to whole milliseconds
    EXPECT_GE(wait, delay * 3 / 4 - milliseconds(1)) << attempt;
    EXPECT_LE(wait, std::min<nanoseconds>(delay * 5 / 4, policy.max)) << attempt;
  }
}

TEST(Backoff, JitterSpreadsTheWaitsOfClientsThatFailedTogether) {
  BackoffPolicy policy = kPolicy;
  policy.jitter_high = 2.0;
  Backoff first(policy, /*seed=*/1);
  Backoff second(policy, /*seed=*/2);
  EXPECT_NE(first.Next(), second.Next());
}

TEST(Backoff, TheSameSeedGivesTheSameWaits) {
  BackoffPolicy policy = kPolicy;
  policy.jitter_high = 2.0;
  Backoff first(policy, /*seed=*/42);
  Backoff second(policy, /*seed=*/42);
  for (int attempt = 0; attempt < 10; ++attempt) EXPECT_EQ(first.Next(), second.Next());
}

TEST(Jittered, ScalesByADrawFromTheRange) {
  std::mt19937_64 random(3);
  for (int draw = 0; draw < 100; ++draw) {
    const nanoseconds wait = Jittered(milliseconds(1000), 1.0, 2.2, random);
    EXPECT_GE(wait, milliseconds(1000));
    EXPECT_LT(wait, milliseconds(2200));
  }
  EXPECT_EQ(Jittered(milliseconds(1000), 1.0, 1.0, random), milliseconds(1000));
}

}  // namespace
}  // namespace fulcrum
