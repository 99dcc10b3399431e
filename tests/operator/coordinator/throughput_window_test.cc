// Throughput on one clock: committed samples over the span between one rank's step end times.
#include "operator/coordinator/throughput_window.h"

#include <gtest/gtest.h>

namespace fulcrum::coordinator {
namespace {

TEST(ThroughputWindow, IsCommittedSamplesOverTheSpanOfEndTimes) {
  ThroughputWindow window(3);
  EXPECT_FALSE(window.SamplesPerSecond().has_value());
  window.Add(0, 100, 10.0, "a@1");
  EXPECT_FALSE(window.SamplesPerSecond().has_value()) << "one end time spans nothing";
  window.Add(1, 100, 10.5, "a@1");
  window.Add(2, 100, 11.0, "a@1");
  EXPECT_DOUBLE_EQ(*window.SamplesPerSecond(), 200 / 1.0);
  EXPECT_DOUBLE_EQ(*window.StepSeconds(), 0.5);
  // Three steps kept after the oldest: 0 drops out once 3 more are known.
  window.Add(3, 100, 11.5, "a@1");
  window.Add(4, 100, 13.5, "a@1");
  EXPECT_DOUBLE_EQ(*window.SamplesPerSecond(), 300 / 3.0);
  EXPECT_DOUBLE_EQ(*window.StepSeconds(), 1.0);
}

TEST(ThroughputWindow, ASkippedStepCountsInTheSpanNotInTheSamples) {
  // Step 1's end time never came (rank 0 left the report out): 2 steps' worth of time, but
  // only the samples of the steps whose end times are known after the oldest.
  ThroughputWindow window(10);
  window.Add(0, 100, 0.0 + 1.0, "a@1");
  window.Add(2, 100, 2.0, "a@1");
  EXPECT_DOUBLE_EQ(*window.StepSeconds(), 0.5);
}

TEST(ThroughputWindow, StartsOverOnAnotherClockOrATimeThatGoesBack) {
  ThroughputWindow window(10);
  window.Add(0, 100, 10.0, "a@1");
  window.Add(1, 100, 11.0, "a@1");
  window.Add(2, 100, 3.0, "b@2");  // a new generation's rank 0: its clock has its own origin
  EXPECT_FALSE(window.SamplesPerSecond().has_value());
  window.Add(3, 100, 4.0, "b@2");
  EXPECT_DOUBLE_EQ(*window.SamplesPerSecond(), 100.0);
  window.Add(4, 100, 1.0, "b@2");  // a restarted trainer
  EXPECT_FALSE(window.SamplesPerSecond().has_value());
}

}  // namespace
}  // namespace fulcrum::coordinator
