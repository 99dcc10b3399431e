#include "common/result.h"

#include <gtest/gtest.h>

#include <memory>

namespace fulcrum {
namespace {

TEST(Result, HoldsAValueWhenOk) {
  Result<int> result = 42;
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 42);
}

TEST(Result, HoldsAnErrorThatNamesTheField) {
  Result<int> result = InvalidArgument("spec.globalBatchSize", "must be at least 1; set it to 256");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(result.error().ToString(),
            "InvalidArgument (spec.globalBatchSize): must be at least 1; set it to 256");
}

TEST(Result, ValueOrGivesTheFallbackOnlyInPlaceOfAnError) {
  const Result<int> value = 42;
  const Result<int> error = InvalidArgument("spec.x", "is wrong");
  EXPECT_EQ(value.value_or(7), 42);
  EXPECT_EQ(error.value_or(7), 7);
}

TEST(Result, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> result = std::make_unique<int>(7);
  std::unique_ptr<int> taken = std::move(result).value();
  EXPECT_EQ(*taken, 7);
}

TEST(Status, DefaultsToOkAndCarriesErrors) {
  EXPECT_TRUE(Ok().ok());
  Status failed = MakeError(ErrorCode::kUnavailable, "api server not ready");
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().ToString(), "Unavailable: api server not ready");
}

}  // namespace
}  // namespace fulcrum
