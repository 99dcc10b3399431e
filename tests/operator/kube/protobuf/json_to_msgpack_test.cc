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

TEST(JsonToMsgpack, DeepNestingIsRefusedNotACrash) {
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  EXPECT_FALSE(JsonToMsgpack(std::string(100000, '['), out));
}

}  // namespace
}  // namespace fulcrum::kube::protobuf
