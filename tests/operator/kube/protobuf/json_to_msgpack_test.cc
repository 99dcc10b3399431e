// Converting embedded JSON (FieldsV1, RawExtension) straight to MessagePack gives what
// nlohmann::json's own parse-and-encode gives, and refuses what is not JSON.
#include "operator/kube/protobuf/json_to_msgpack.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fulcrum::kube::protobuf {
namespace {

nlohmann::json Convert(const std::string& text) {
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  EXPECT_TRUE(JsonToMsgpack(text, out)) << text;
  return nlohmann::json::from_msgpack(bytes);
}

TEST(JsonToMsgpack, AgreesWithNlohmannOnValidDocuments) {
  const std::vector<std::string> documents = {
      R"({"f:metadata":{"f:labels":{".":{},"f:app":{}}},"k:{\"name\":\"main\"}":{".":{}}})",
      R"([1, -1, 0, 18446744073709551615, -9223372036854775808, 1.5, -2e3, 3E-2])",
      R"({"a":"tab\tquote\"slash\/back\\nl\n","u":"\u00e9\u4e2d\ud83d\ude00","e":""})",
      R"(  {"nested":[[],[{}],{"x":[true,false,null]}]}  )",
      R"("just a string")",
      R"(42)",
      R"({"0":0,"1":1,"2":2,"3":3,"4":4,"5":5,"6":6,"7":7,"8":8,"9":9,"10":10,"11":11,"12":12,"13":13,"14":14,"15":15,"16":16})",
  };
  for (const std::string& text : documents) {
    EXPECT_EQ(Convert(text), nlohmann::json::parse(text)) << text;
  }
}

TEST(JsonToMsgpack, RefusesInvalidJsonAndWritesNothing) {
  for (const std::string text :
       {"", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "\"unterminated",
        "\"bad \\q escape\"", "\"\\ud800 lone\"", "tru", "[1] 2", "{\"a\":1,}", "\"ctl \x01\""}) {
    std::vector<std::uint8_t> bytes;
    MsgpackWriter out(bytes);
    EXPECT_FALSE(JsonToMsgpack(text, out)) << text;
    EXPECT_TRUE(bytes.empty()) << text;
  }
}

// JSON text is UTF-8 (RFC 8259). Accepting anything else put strings in the cache that
// nlohmann::json then refused to write out (dump() threw type_error 316): found by
// json_to_msgpack_fuzz.
TEST(JsonToMsgpack, RefusesInvalidUtf8SoEveryResultCanBeWrittenOut) {
  for (const std::string text : {
           "\"\xff\"",  // never valid
           "\"a\x80"
           "b\"",                   // a lone continuation byte
           "\"\xc0\xaf\"",          // overlong '/'
           "\"\xe0\x80\xaf\"",      // overlong, three bytes
           "\"\xed\xa0\x80\"",      // a UTF-16 surrogate, encoded
           "\"\xf4\x90\x80\x80\"",  // past U+10FFFF
           "\"\xe2\x82\"",          // cut short
           "{\"f:\xa1\":{}}",       // in a key
       }) {
    std::vector<std::uint8_t> bytes;
    MsgpackWriter out(bytes);
    EXPECT_FALSE(JsonToMsgpack(text, out)) << testing::PrintToString(text);
    EXPECT_TRUE(bytes.empty());
  }
  // Valid multi-byte text, raw rather than escaped, still converts and writes out.
  const std::string valid =
      "{\"k\":\"caf\xc3\xa9 \xe4\xb8\xad \xf0\x9f\x9a\x80 \xf4\x8f\xbf\xbf\"}";
  EXPECT_EQ(Convert(valid).dump(), nlohmann::json::parse(valid).dump());
}

// 1e400 is JSON, but past a double's range: it became infinity, which JSON cannot write back
// (written out as null). Refused, as nlohmann::json refuses it (json_to_msgpack_fuzz).
TEST(JsonToMsgpack, RefusesNumbersPastADoublesRange) {
  for (const std::string& text :
       std::vector<std::string>{"1e400", "-1E+309", "[23333333E303333333333333]",
                                std::string(400, '9'), "9." + std::string(400, '1') + "e308"}) {
    std::vector<std::uint8_t> bytes;
    MsgpackWriter out(bytes);
    EXPECT_FALSE(JsonToMsgpack(text, out)) << text;
    EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << text;
  }
  // Tiny numbers round to zero and big ones in range stay: both as nlohmann reads them.
  for (const std::string& text :
       std::vector<std::string>{"1e-400", "1.7e308", std::string(300, '9')}) {
    EXPECT_EQ(Convert(text), nlohmann::json::parse(text)) << text;
  }
}

TEST(JsonToMsgpack, DeepNestingIsRefusedNotACrash) {
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  EXPECT_FALSE(JsonToMsgpack(std::string(100000, '['), out));
}

}  // namespace
}  // namespace fulcrum::kube::protobuf
