#include "tests/tools/local_node/pods/restart_backoff.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

using std::chrono::milliseconds;

TEST(RestartBackoff, FirstRestartIsImmediateThenDoublesUpToTheMaximum) {
  RestartBackoff backoff({.initial = milliseconds(10'000), .max = milliseconds(40'000)});
  const milliseconds brief(100);
  EXPECT_EQ(backoff.NextDelay(brief), milliseconds(0));
  EXPECT_EQ(backoff.NextDelay(brief), milliseconds(10'000));
  EXPECT_EQ(backoff.NextDelay(brief), milliseconds(20'000));
  EXPECT_EQ(backoff.NextDelay(brief), milliseconds(40'000));
  EXPECT_EQ(backoff.NextDelay(brief), milliseconds(40'000));
}

TEST(RestartBackoff, AContainerThatRanLongStartsOverFromNoDelay) {
  RestartBackoff backoff({.initial = milliseconds(10'000), .max = milliseconds(40'000)});
  backoff.NextDelay(milliseconds(1));
  backoff.NextDelay(milliseconds(1));
  EXPECT_EQ(backoff.NextDelay(milliseconds(80'001)), milliseconds(0));
  EXPECT_EQ(backoff.NextDelay(milliseconds(1)), milliseconds(10'000));
}

}  // namespace
}  // namespace fulcrum::local_node
