#include "operator/kube/client/micro_time.h"

#include <gtest/gtest.h>

namespace fulcrum::kube {
namespace {

TEST(ApiTimes, MicroTimeKeepsMicrosecondsAndTimeIsCutToTheSecond) {
  const auto time =
      std::chrono::system_clock::from_time_t(1'800'000'000) + std::chrono::microseconds(123'456);
  EXPECT_EQ(FormatMicroTime(time), "2027-01-15T08:00:00.123456Z");
  EXPECT_EQ(FormatTime(time), "2027-01-15T08:00:00Z");  // not rounded up
}

}  // namespace
}  // namespace fulcrum::kube
