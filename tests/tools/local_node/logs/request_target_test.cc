#include "tests/tools/local_node/logs/request_target.h"

#include <gtest/gtest.h>

namespace fulcrum::local_node {
namespace {

RequestTarget ParseOk(std::string_view target) {
  Result<RequestTarget> parsed = ParseRequestTarget(target);
  EXPECT_TRUE(parsed.ok()) << target << ": " << (parsed.ok() ? "" : parsed.error().ToString());
  return parsed.ok() ? *parsed : RequestTarget{};
}

Error ParseError(std::string_view target) {
  Result<RequestTarget> parsed = ParseRequestTarget(target);
  EXPECT_FALSE(parsed.ok()) << target << " parsed, but should not have";
  return parsed.ok() ? Error{} : parsed.error();
}

TEST(ParseRequestTarget, ReadsContainerLogPathAndOptions) {
  const RequestTarget target = ParseOk(
      "/containerLogs/team-a/trainer-0/main?follow=true&previous=1&tailLines=10&limitBytes=2048");
  ASSERT_EQ(target.kind, RequestTarget::Kind::kContainerLogs);
  EXPECT_EQ(target.logs.ns, "team-a");
  EXPECT_EQ(target.logs.pod, "trainer-0");
  EXPECT_EQ(target.logs.container, "main");
  EXPECT_TRUE(target.logs.follow);
  EXPECT_TRUE(target.logs.previous);
  EXPECT_EQ(target.logs.tail_lines, 10);
  EXPECT_EQ(target.logs.limit_bytes, 2048);
}

TEST(ParseRequestTarget, LeavesOptionsUnsetWhenAbsent) {
  const RequestTarget target = ParseOk("/containerLogs/ns/pod/c");
  ASSERT_EQ(target.kind, RequestTarget::Kind::kContainerLogs);
  EXPECT_FALSE(target.logs.follow);
  EXPECT_FALSE(target.logs.previous);
  EXPECT_FALSE(target.logs.tail_lines.has_value());
  EXPECT_FALSE(target.logs.limit_bytes.has_value());
}

TEST(ParseRequestTarget, DecodesPercentEscapesInPathSegments) {
  const RequestTarget target = ParseOk("/containerLogs/my%2Dns/pod%20a/c%2Bd");
  ASSERT_EQ(target.kind, RequestTarget::Kind::kContainerLogs);
  EXPECT_EQ(target.logs.ns, "my-ns");
  EXPECT_EQ(target.logs.pod, "pod a");
  EXPECT_EQ(target.logs.container, "c+d");  // '+' is literal in a path
}

TEST(ParseRequestTarget, ReadsBareAndExplicitlyFalseBooleans) {
  EXPECT_TRUE(ParseOk("/containerLogs/ns/p/c?follow").logs.follow);
  EXPECT_FALSE(ParseOk("/containerLogs/ns/p/c?follow=false").logs.follow);
  EXPECT_FALSE(ParseOk("/containerLogs/ns/p/c?follow=0&previous=False").logs.previous);
}

TEST(ParseRequestTarget, IgnoresUnknownParameters) {
  const RequestTarget target = ParseOk("/containerLogs/ns/p/c?insecureSkipTLSVerifyBackend=true&x");
  EXPECT_EQ(target.kind, RequestTarget::Kind::kContainerLogs);
}

TEST(ParseRequestTarget, RejectsMalformedNumbersNamingTheParameter) {
  for (const char* target :
       {"/containerLogs/ns/p/c?tailLines=abc", "/containerLogs/ns/p/c?tailLines=",
        "/containerLogs/ns/p/c?tailLines=5x", "/containerLogs/ns/p/c?tailLines=-1"}) {
    const Error error = ParseError(target);
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << target;
    EXPECT_EQ(error.field, "tailLines") << target;
    EXPECT_NE(error.message.find("tailLines"), std::string::npos) << error.message;
  }
  for (const char* target :
       {"/containerLogs/ns/p/c?limitBytes=0", "/containerLogs/ns/p/c?limitBytes=1e3"}) {
    const Error error = ParseError(target);
    EXPECT_EQ(error.field, "limitBytes") << target;
    EXPECT_NE(error.message.find("limitBytes"), std::string::npos) << error.message;
  }
  EXPECT_EQ(ParseError("/containerLogs/ns/p/c?follow=maybe").field, "follow");
}

TEST(ParseRequestTarget, RefusesTimeFiltersBecauseLinesCarryNoTimestamps) {
  for (const char* name :
       {"timestamps=true", "sinceSeconds=60", "sinceTime=2024-01-01T00:00:00Z"}) {
    const Error error = ParseError(std::string("/containerLogs/ns/p/c?") + name);
    EXPECT_EQ(error.code, ErrorCode::kInvalidArgument) << name;
    EXPECT_NE(error.message.find("no per-line timestamps"), std::string::npos) << error.message;
    EXPECT_EQ(error.field, std::string(name).substr(0, std::string(name).find('='))) << name;
  }
  // Asking for no timestamps is what the agent does anyway.
  EXPECT_EQ(ParseOk("/containerLogs/ns/p/c?timestamps=false").kind,
            RequestTarget::Kind::kContainerLogs);
}

TEST(ParseRequestTarget, RoutesHealthAndUnsupportedStreamingEndpoints) {
  EXPECT_EQ(ParseOk("/healthz").kind, RequestTarget::Kind::kHealth);
  for (const char* feature : {"exec", "attach", "portForward", "run"}) {
    const RequestTarget target = ParseOk(std::string("/") + feature + "/ns/pod/c?command=ls");
    EXPECT_EQ(target.kind, RequestTarget::Kind::kNotSupported) << feature;
    EXPECT_EQ(target.feature, feature);
  }
}

TEST(ParseRequestTarget, TreatsOtherPathsAsUnknown) {
  for (const char* target :
       {"/", "/metrics", "/containerLogs/ns/pod", "/containerLogs/ns/pod/c/extra",
        "/containerLogs/ns//c", "/containerLogsX/ns/p/c", "relative"}) {
    EXPECT_EQ(ParseOk(target).kind, RequestTarget::Kind::kUnknown) << target;
  }
}

TEST(ParseRequestTarget, RejectsMalformedEscapes) {
  EXPECT_EQ(ParseError("/containerLogs/ns/p%zz/c").code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(ParseError("/containerLogs/ns/p/c?tailLines=%4").code, ErrorCode::kInvalidArgument);
}

TEST(PercentDecode, DecodesEscapesAndOptionallyPlus) {
  EXPECT_EQ(PercentDecode("a%2Fb+c", /*plus_is_space=*/true), "a/b c");
  EXPECT_EQ(PercentDecode("a%2fb+c", /*plus_is_space=*/false), "a/b+c");
  EXPECT_EQ(PercentDecode("100%", /*plus_is_space=*/false), std::nullopt);
  EXPECT_EQ(PercentDecode("%4", /*plus_is_space=*/false), std::nullopt);
}

}  // namespace
}  // namespace fulcrum::local_node
