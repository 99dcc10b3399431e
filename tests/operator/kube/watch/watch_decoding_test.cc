// Newline-delimited JSON and list responses across arbitrary chunk boundaries,
// and the meaning of
// each watch event type (ERROR with 410 becomes kExpired).
#include <gtest/gtest.h>

#include <deque>

#include "operator/kube/watch/list_stream_decoder.h"
#include "operator/kube/watch/ndjson_decoder.h"
#include "operator/kube/watch/watch_stream.h"

namespace fulcrum::kube {
namespace {

const std::string kThreeEvents =
    R"({"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"11"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"12"},"data":{"x":"line\nbreak"}}})"
    "\r\n"
    R"({"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"19"}}})"
    "\n";

// Replays fixed chunks as a response body.
class ScriptedBody final : public ResponseStream {
 public:
  explicit ScriptedBody(std::deque<std::string> chunks) : chunks_(std::move(chunks)) {}
  Result<std::string> ReadSome(std::size_t max, std::size_t) override {
    if (chunks_.empty()) return std::string();
    std::string chunk = chunks_.front().substr(0, max);
    chunks_.front().erase(0, chunk.size());
    if (chunks_.front().empty()) chunks_.pop_front();
    return chunk;
  }
  void Cancel() override {}

 private:
  std::deque<std::string> chunks_;
};

TEST(NdjsonDecoder, YieldsTheSameLinesForEverySplitOfTheStream) {
  for (std::size_t chunk = 1; chunk <= kThreeEvents.size(); ++chunk) {
    NdjsonDecoder decoder;
    std::vector<std::string> lines;
    for (std::size_t at = 0; at < kThreeEvents.size(); at += chunk) {
      decoder.Feed(std::string_view(kThreeEvents).substr(at, chunk));
      while (true) {
        auto line = decoder.NextLine();
        ASSERT_TRUE(line.ok()) << line.error().ToString();
        if (!line->has_value()) break;
        lines.push_back(**line);
      }
    }
    ASSERT_EQ(lines.size(), 3u) << "chunk size " << chunk;
    EXPECT_EQ(lines[1].back(), '}') << "\\r of CRLF must be dropped";
    EXPECT_EQ(decoder.pending_bytes(), 0u);
  }
}

TEST(NdjsonDecoder, ALineOverTheLimitIsAnErrorNamingTheLimitNotABiggerBuffer) {
  NdjsonDecoder decoder(/*max_line_bytes=*/64);
  decoder.Feed(std::string(64, 'x') + "\n");  // exactly at the limit: fine
  auto at_limit = decoder.NextLine();
  ASSERT_TRUE(at_limit.ok()) << at_limit.error().ToString();
  EXPECT_EQ(at_limit->value().size(), 64u);

  // A complete line one byte over.
  decoder.Feed(std::string(65, 'y') + "\n");
  auto over = decoder.NextLine();
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("limit of 64 bytes"), std::string::npos)
      << over.error().message;

  // A line that never ends: refused once it passes the limit, fed in small
  // chunks, so the buffer never holds much more than the limit.
  NdjsonDecoder endless(/*max_line_bytes=*/1000);
  bool refused = false;
  for (int chunk = 0; chunk < 1000 && !refused; ++chunk) {
    endless.Feed(std::string(100, 'z'));
    auto line = endless.NextLine();
    if (!line.ok()) {
      refused = true;
      EXPECT_NE(line.error().message.find("limit of 1000 bytes"), std::string::npos)
          << line.error().message;
    } else {
      EXPECT_FALSE(line->has_value());
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_LE(endless.pending_bytes(), 1100u);
}

TEST(WatchStream, AnEventLongerThanTheLimitFailsTheStreamNamingTheLimit) {
  const std::string huge_event = R"({"type":"ADDED","object":{"metadata":{"name":")" +
                                 std::string(4096, 'a') + R"("}}})" + "\n";
  std::deque<std::string> chunks;
  for (std::size_t at = 0; at < huge_event.size(); at += 100)
    chunks.push_back(huge_event.substr(at, 100));
  WatchStream stream(std::make_unique<ScriptedBody>(std::move(chunks)), "watch /x",
                     /*max_event_bytes=*/1024);
  auto next = stream.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_NE(next.error().message.find("limit of 1024 bytes"), std::string::npos)
      << next.error().message;
  // The default bound is client-go's.
  EXPECT_EQ(NdjsonDecoder().max_line_bytes(), 16u * 1024 * 1024);
}

TEST(WatchStream, DecodesEventsSplitAcrossChunksAndEndsCleanly) {
  std::deque<std::string> chunks;
  for (std::size_t at = 0; at < kThreeEvents.size(); at += 7)
    chunks.push_back(kThreeEvents.substr(at, 7));
  WatchStream stream(std::make_unique<ScriptedBody>(std::move(chunks)), "test");
  std::vector<std::pair<WatchEventType, std::string>> seen;
  while (true) {
    auto next = stream.Next();
    ASSERT_TRUE(next.ok()) << next.error().ToString();
    if (!next->has_value()) break;
    seen.emplace_back((*next)->type, (*next)->ResourceVersion());
  }
  EXPECT_EQ(seen, (std::vector<std::pair<WatchEventType, std::string>>{
                      {WatchEventType::kAdded, "11"},
                      {WatchEventType::kModified, "12"},
                      {WatchEventType::kBookmark, "19"}}));
}

TEST(WatchStream, InStreamGoneIsExpired) {
  const std::string gone =
      R"json({"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure",)json"
      R"json("message":"too old resource version: 5 (99)","reason":"Expired","code":410}})json"
      "\n";
  WatchStream stream(std::make_unique<ScriptedBody>(std::deque<std::string>{gone}), "test");
  auto next = stream.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.error().code, ErrorCode::kExpired) << next.error().ToString();
  EXPECT_NE(next.error().message.find("too old resource version"), std::string::npos);
}

TEST(WatchStream, AStreamCutInsideAnEventIsAnError) {
  WatchStream stream(std::make_unique<ScriptedBody>(std::deque<std::string>{R"({"type":"ADD)"}),
                     "test");
  auto next = stream.Next();
  ASSERT_FALSE(next.ok());
  EXPECT_EQ(next.error().code, ErrorCode::kUnavailable);
}

TEST(WatchEvent, UnknownTypesAndNonJsonAreRejected) {
  EXPECT_FALSE(DecodeWatchEvent(R"({"type":"EXPLODED","object":{}})", "t").ok());
  EXPECT_FALSE(DecodeWatchEvent("not json", "t").ok());
}

// Found by watch_event_fuzz: a code that is not a number threw out of the decoder.
TEST(WatchEvent, AnErrorEventWhoseCodeIsNotAnHttpStatusIsAnErrorNotAnException) {
  for (const char* code : {R"("")", "1e400", "-3", "99999999999", "null", "[]"}) {
    const std::string line =
        std::string(R"({"type":"ERROR","object":{"kind":"Status","code":)") + code + "}}";
    const Result<WatchEvent> event = DecodeWatchEvent(line, "t");
    EXPECT_FALSE(event.ok()) << code;
  }
  // Also found by watch_event_fuzz: Status fields of other types threw.
  EXPECT_FALSE(DecodeWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","code":500,)"
                                R"("reason":1,"message":{},"details":{"causes":[1],)"
                                R"("retryAfterSeconds":1e30}}})",
                                "t")
                   .ok());
  // Found by watch_event_fuzz in CI: a resourceVersion that is not a string threw.
  const Result<WatchEvent> odd = DecodeWatchEvent(
      R"({"type":"ADDED","object":{"metadata":{"name":"p","resourceVersion":[1]}}})", "t");
  ASSERT_TRUE(odd.ok());
  EXPECT_EQ(odd->ResourceVersion(), "");
  const Result<WatchEvent> gone =
      DecodeWatchEvent(R"({"type":"ERROR","object":{"kind":"Status","code":410}})", "t");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kExpired);
}

}  // namespace
}  // namespace fulcrum::kube

namespace fulcrum::kube {
namespace {

// Braces and quotes inside strings, and keys named "items"/"metadata" below
// the top level, must not confuse the splitter.
const std::string kList =
    R"json({"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"abc"},)json"
    R"json("items":[{"metadata":{"name":"a"},"data":{"items":"[{\"x\":\"}\"}]","metadata":"{"}},)json"
    R"json({"metadata":{"name":"b\"}"},"data":{}} , {"metadata":{"name":"c"},"list":[{"items":[1,2]}]}]})json";

TEST(ListStreamDecoder, SplitsItemsAndMetadataForEveryChunking) {
  for (std::size_t chunk = 1; chunk <= kList.size(); ++chunk) {
    std::vector<std::string> names;
    std::string version, token;
    ListStreamDecoder decoder(
        [&](std::string_view text) {
          names.push_back(nlohmann::json::parse(text)["metadata"]["name"]);
        },
        [&](std::string_view text) {
          const auto metadata = nlohmann::json::parse(text);
          version = metadata["resourceVersion"];
          token = metadata["continue"];
        });
    for (std::size_t at = 0; at < kList.size(); at += chunk)
      decoder.Feed(std::string_view(kList).substr(at, chunk));
    ASSERT_EQ(names, (std::vector<std::string>{"a", "b\"}", "c"})) << "chunk size " << chunk;
    EXPECT_EQ(version, "42");
    EXPECT_EQ(token, "abc");
    EXPECT_TRUE(decoder.complete());
  }
}

TEST(ListStreamDecoder, AnEmptyListHasNoItems) {
  int items = 0;
  ListStreamDecoder decoder([&](std::string_view) { ++items; }, [](std::string_view) {});
  decoder.Feed(R"({"kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]})");
  EXPECT_EQ(items, 0);
  EXPECT_TRUE(decoder.complete());
}

}  // namespace
}  // namespace fulcrum::kube
