#include "tests/tools/local_node/podspec/quantity.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

std::int64_t Scaled(std::string_view text, int scale) {
  Result<Quantity> quantity = Quantity::Parse(text);
  EXPECT_TRUE(quantity.ok()) << text;
  if (!quantity.ok()) return -1;
  Result<std::int64_t> value = quantity->ScaledCeil(scale);
  EXPECT_TRUE(value.ok()) << text;
  return value.ok() ? *value : -1;
}

TEST(Quantity, ReadsDecimalSuffixesExactly) {
  EXPECT_EQ(Scaled("500m", 3), 500);
  EXPECT_EQ(Scaled("0.1", 3), 100);  // floating point would round 100.00000000000001 up to 101
  EXPECT_EQ(Scaled("2", 3), 2000);
  EXPECT_EQ(Scaled("1k", 0), 1000);
  EXPECT_EQ(Scaled("3M", 0), 3000000);
  EXPECT_EQ(Scaled("2e3", 0), 2000);
  EXPECT_EQ(Scaled("15E-1", 0), 2);
}

TEST(Quantity, ReadsBinarySuffixes) {
  EXPECT_EQ(Scaled("1Ei", 0), std::int64_t{1} << 60);
  EXPECT_EQ(Scaled("1E", 0), 1000000000000000000);
  EXPECT_EQ(Scaled("1Ki", 0), 1024);
  EXPECT_EQ(Scaled("128Mi", 0), 128 * 1024 * 1024);
  EXPECT_EQ(Scaled("1.5Gi", 0), 1610612736);
}

TEST(Quantity, RoundsFractionsUp) {
  EXPECT_EQ(Scaled("1.5", 0), 2);
  EXPECT_EQ(Scaled("100n", 3), 1);
  EXPECT_EQ(Scaled("1n", 0), 1);
  EXPECT_EQ(Scaled("0", 3), 0);
}

TEST(Quantity, RefusesMalformedNegativeAndOverflowingQuantities) {
  EXPECT_FALSE(Quantity::Parse("12x").ok());
  EXPECT_FALSE(Quantity::Parse("").ok());
  EXPECT_FALSE(Quantity::Parse("m").ok());
  EXPECT_FALSE(Quantity::Parse("-1").ok());
  EXPECT_EQ(Quantity::Parse("-1").error().code, ErrorCode::kInvalidArgument);
  Result<Quantity> huge = Quantity::Parse("16Ei");
  ASSERT_TRUE(huge.ok());
  EXPECT_FALSE(huge->ScaledCeil(0).ok());
}

TEST(Quantity, KnowsZero) {
  EXPECT_TRUE(Quantity::Parse("0")->IsZero());
  EXPECT_TRUE(Quantity::Parse("0.000")->IsZero());
  EXPECT_FALSE(Quantity::Parse("1m")->IsZero());
}

}  // namespace
}  // namespace fulcrum::local_node
