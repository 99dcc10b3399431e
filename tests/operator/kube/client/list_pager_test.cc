// ListAllPages: a 410 on a continued page reads the list again whole (client-go's
// pager with FullListIfExpired), instead of failing into a re-list in pages
// that can expire again.
#include "operator/kube/client/list_pager.h"

#include <gtest/gtest.h>

#include <deque>

namespace fulcrum::kube {
namespace {

Error Gone() {
  return MakeError(ErrorCode::kExpired, "The provided continue parameter is too old");
}

ObjectList Page(std::string version, std::string continue_token) {
  ObjectList page;
  page.resource_version = std::move(version);
  page.continue_token = std::move(continue_token);
  return page;
}

// Answers pages from a script and records the options each was asked with.
struct ScriptedPages {
  std::deque<Result<ObjectList>> answers;
  std::vector<ListOptions> asked;
  int items = 0;  // what the caller holds: each page "adds" one item
  ListPageFunction Function() {
    return [this](const ListOptions& options) -> Result<ObjectList> {
      asked.push_back(options);
      Result<ObjectList> answer = answers.front();
      answers.pop_front();
      if (answer.ok()) ++items;
      return answer;
    };
  }
};

TEST(ListAllPages, AnExpiredContinueTokenFallsBackToOneFullListAtTheRequestedVersion) {
  ScriptedPages pages;
  pages.answers = {Page("100", "c1"), Page("100", "c2"), Gone(), Page("250", "")};
  ListOptions options;
  options.limit = 2;
  options.label_selector = "app=x";
  int discarded = 0;
  auto listed = ListAllPages(options, pages.Function(), [&] {
    ++discarded;
    pages.items = 0;
  });
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  EXPECT_TRUE(listed->full_list_after_expiry);
  EXPECT_EQ(listed->resource_version, "250");
  EXPECT_EQ(listed->pages, 4);
  EXPECT_EQ(discarded, 1) << "the partial pages must be dropped before the full list";
  EXPECT_EQ(pages.items, 1) << "only the full list's items remain";
  ASSERT_EQ(pages.asked.size(), 4u);
  EXPECT_EQ(pages.asked[2].continue_token, "c2");
  const ListOptions& full = pages.asked[3];
  EXPECT_EQ(full.limit, 0) << "the fallback must not be paged";
  EXPECT_EQ(full.continue_token, "");
  EXPECT_EQ(full.label_selector, "app=x");
}

TEST(ListAllPages, TheFallbackKeepsTheVersionAndMatchFirstAskedFor) {
  ScriptedPages pages;
  pages.answers = {Page("100", "c1"), Gone(), Page("120", "")};
  ListOptions options;
  options.limit = 1;
  options.resource_version = "90";
  options.resource_version_match = "NotOlderThan";
  auto listed = ListAllPages(options, pages.Function(), [] {});
  ASSERT_TRUE(listed.ok()) << listed.error().ToString();
  ASSERT_EQ(pages.asked.size(), 3u);
  EXPECT_EQ(pages.asked[1].resource_version, "") << "a continued page carries only the token";
  EXPECT_EQ(pages.asked[2].resource_version, "90");
  EXPECT_EQ(pages.asked[2].resource_version_match, "NotOlderThan");
}

TEST(ListAllPages, AnExpiredFirstPageIsTheCallersToHandle) {
  ScriptedPages pages;
  pages.answers = {Gone()};
  ListOptions options;
  options.limit = 1;
  options.resource_version = "90";
  int discarded = 0;
  auto listed = ListAllPages(options, pages.Function(), [&] { ++discarded; });
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, ErrorCode::kExpired);
  EXPECT_EQ(pages.asked.size(), 1u);
  EXPECT_EQ(discarded, 0);
}

TEST(ListAllPages, OtherErrorsOnAContinuedPageAreReturned) {
  ScriptedPages pages;
  pages.answers = {Page("100", "c1"), MakeError(ErrorCode::kUnavailable, "connection reset")};
  ListOptions options;
  options.limit = 1;
  auto listed = ListAllPages(options, pages.Function(), [] {});
  ASSERT_FALSE(listed.ok());
  EXPECT_EQ(listed.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(pages.asked.size(), 2u);
}

}  // namespace
}  // namespace fulcrum::kube
