#include "common/rfc3339.h"

#include <gtest/gtest.h>

namespace fulcrum {
namespace {

using std::chrono::system_clock;

// 2027-01-15T08:00:00Z and 123456 µs past it.
const system_clock::time_point kTime =
    system_clock::from_time_t(1'800'000'000) + std::chrono::microseconds(123'456);

TEST(FormatRfc3339, TimeIsCutToTheSecondAsKubernetesWritesMetav1Time) {
  EXPECT_EQ(FormatRfc3339(kTime), "2027-01-15T08:00:00Z");  // not rounded up
}

TEST(FormatRfc3339, MicroTimeKeepsSixDigitsTrailingZerosIncluded) {
  EXPECT_EQ(FormatRfc3339(kTime, TimePrecision::kMicroseconds), "2027-01-15T08:00:00.123456Z");
  EXPECT_EQ(FormatRfc3339(system_clock::from_time_t(1'800'000'000), TimePrecision::kMicroseconds),
            "2027-01-15T08:00:00.000000Z");
}

TEST(FormatRfc3339, LogTimesKeepThreeDigits) {
  EXPECT_EQ(FormatRfc3339(kTime, TimePrecision::kMilliseconds), "2027-01-15T08:00:00.123Z");
}

TEST(FormatRfc3339, ProtobufTimestampsFormatAsGoDoesFromEpochToYear9999) {
  EXPECT_EQ(FormatRfc3339(0, 0, TimePrecision::kSeconds), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(951'782'400, 0, TimePrecision::kSeconds), "2000-02-29T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(-1, 0, TimePrecision::kSeconds), "1969-12-31T23:59:59Z");
  EXPECT_EQ(FormatRfc3339(253'402'300'799, 999'999'999, TimePrecision::kMicroseconds),
            "9999-12-31T23:59:59.999999Z");
}

TEST(ParseRfc3339, ReadsKubernetesTimesAndMicroTimes) {
  const auto time = ParseRfc3339("2027-01-15T08:00:00Z", "status.startTime");
  ASSERT_TRUE(time.ok()) << time.error().ToString();
  EXPECT_EQ(*time, system_clock::from_time_t(1'800'000'000));
  const auto micro = ParseRfc3339("2027-01-15T08:00:00.123456Z", "spec.renewTime");
  ASSERT_TRUE(micro.ok()) << micro.error().ToString();
  EXPECT_EQ(*micro, kTime);
}

TEST(ParseRfc3339, ReadsAnOffsetAsTheSameInstantInUtc) {
  const auto time = ParseRfc3339("2027-01-15T10:00:00+02:00", "status.startTime");
  ASSERT_TRUE(time.ok()) << time.error().ToString();
  EXPECT_EQ(FormatRfc3339(*time), "2027-01-15T08:00:00Z");
}

TEST(ParseRfc3339, RoundTripsWhatFormatWrites) {
  for (const TimePrecision precision :
       {TimePrecision::kSeconds, TimePrecision::kMilliseconds, TimePrecision::kMicroseconds}) {
    const std::string text = FormatRfc3339(kTime, precision);
    const auto parsed = ParseRfc3339(text, "time");
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(FormatRfc3339(*parsed, precision), text);
  }
}

TEST(ParseRfc3339, ABadStringIsAnErrorNamingTheFieldAndTheText) {
  for (const char* text : {"", "yesterday", "2027-01-15T08:00:00", "2027-01-15 08:00:00Z"}) {
    const auto time = ParseRfc3339(text, "status.completionTime");
    ASSERT_FALSE(time.ok()) << text;
    EXPECT_EQ(time.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(time.error().field, "status.completionTime");
    EXPECT_NE(time.error().message.find("'" + std::string(text) + "'"), std::string::npos)
        << time.error().message;
  }
}

}  // namespace
}  // namespace fulcrum
