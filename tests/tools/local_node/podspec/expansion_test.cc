#include "tests/tools/local_node/podspec/expansion.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace fulcrum::local_node {
namespace {

std::string ExpandWith(std::string_view input,
                       const std::map<std::string, std::string, std::less<>>& variables) {
  return Expand(input, [&variables](std::string_view name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  });
}

TEST(Expand, ReplacesADefinedReferenceWithItsValue) {
  EXPECT_EQ(ExpandWith("a-$(X)-b", {{"X", "1"}}), "a-1-b");
  EXPECT_EQ(ExpandWith("$(X)$(Y)", {{"X", "1"}, {"Y", "2"}}), "12");
}

TEST(Expand, LeavesAnUndefinedReferenceAsWritten) {
  EXPECT_EQ(ExpandWith("a $(NOPE) b", {{"X", "1"}}), "a $(NOPE) b");
}

TEST(Expand, TurnsDoubleDollarIntoOneDollarSoDollarDollarParenIsLiteral) {
  EXPECT_EQ(ExpandWith("$$(X)", {{"X", "1"}}), "$(X)");
  EXPECT_EQ(ExpandWith("cost: $$5", {}), "cost: $5");
  EXPECT_EQ(ExpandWith("$$$(X)", {{"X", "1"}}), "$1");
}

TEST(Expand, KeepsDollarBeforeAnyOtherCharacter) {
  EXPECT_EQ(ExpandWith("$X ${X} $-", {{"X", "1"}}), "$X ${X} $-");
}

TEST(Expand, KeepsAnUnclosedReferenceLiteral) {
  EXPECT_EQ(ExpandWith("$(X", {{"X", "1"}}), "$(X");
  EXPECT_EQ(ExpandWith("a $(", {{"X", "1"}}), "a $(");
}

TEST(Expand, KeepsATrailingDollar) {
  EXPECT_EQ(ExpandWith("price$", {}), "price$");
}

TEST(Expand, NameRunsToTheFirstClosingParenthesisWithoutNesting) {
  EXPECT_EQ(ExpandWith("$(A(B))", {{"A(B", "v"}}), "v)");
  EXPECT_EQ(ExpandWith("$(X $(X)", {{"X", "1"}}), "$(X $(X)");  // the name is "X $(X", undefined
}

TEST(Expand, LeavesTheEmptyReferenceWhenTheEmptyNameIsUndefined) {
  EXPECT_EQ(ExpandWith("$()", {}), "$()");
}

TEST(Expand, DoesNotExpandAValueAgain) {
  EXPECT_EQ(ExpandWith("$(X)", {{"X", "$(Y)"}, {"Y", "no"}}), "$(Y)");
}

TEST(Expand, SubstitutesAnEmptyValueForADefinedEmptyVariable) {
  EXPECT_EQ(ExpandWith("[$(E)]", {{"E", ""}}), "[]");
}

}  // namespace
}  // namespace fulcrum::local_node
