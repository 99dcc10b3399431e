// The two byte-level pieces: reading protobuf wire format and writing MessagePack that
// nlohmann::json decodes to the intended values.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/kube/protobuf/msgpack_writer.h"
#include "operator/kube/protobuf/wire_reader.h"

namespace fulcrum::kube::protobuf {
namespace {

TEST(WireReader, ReadsVarintsFixedAndLengthDelimitedFields) {
  // field 1 varint 300, field 2 "hi", field 3 fixed32 7, field 4 fixed64 9
  const std::string wire = std::string("\x08\xac\x02\x12\x02hi\x1d\x07\x00\x00\x00", 12) +
                           std::string("\x21\x09\x00\x00\x00\x00\x00\x00\x00", 9);
  WireReader reader(wire);
  auto a = reader.Next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->number, 1u);
  EXPECT_EQ(a->scalar, 300u);
  EXPECT_EQ(reader.PeekNumber(), 2u);
  auto b = reader.Next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->bytes, "hi");
  EXPECT_EQ(reader.Next()->scalar, 7u);
  EXPECT_EQ(reader.Next()->scalar, 9u);
  EXPECT_FALSE(reader.Next());
  EXPECT_FALSE(reader.failed());
}

TEST(WireReader, TruncatedInputFailsInsteadOfReadingPastTheEnd) {
  for (const std::string& wire : {std::string("\x12\x05hi", 4), std::string("\x08\xff", 2),
                                  std::string("\x1d\x01\x02", 3), std::string("\x0b", 1)}) {
    WireReader reader(wire);
    EXPECT_FALSE(reader.Next());
    EXPECT_TRUE(reader.failed()) << "input of " << wire.size() << " bytes";
  }
}

TEST(MsgpackWriter, EveryEncodingSizeDecodesToTheSameValue) {
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  const std::vector<std::int64_t> ints = {
      0,        1,   127, 128,  255,  256,    65535,  65536,         4294967295,    4294967296,
      -1,       -32, -33, -128, -129, -32768, -32769, -2147483648LL, -2147483649LL, INT64_MIN,
      INT64_MAX};
  const std::vector<std::size_t> sizes = {0, 15, 16, 31, 32, 255, 256, 65535, 65536};
  out.ArrayHeader(ints.size() + sizes.size() + 4);
  for (std::int64_t value : ints) out.Int(value);
  for (std::size_t size : sizes) out.String(std::string(size, 'x'));
  out.Double(0.25);
  out.Nil();
  out.Bool(true);
  out.MapHeader(17);
  for (int i = 0; i < 17; ++i) {
    out.String("k" + std::to_string(i));
    out.UInt(static_cast<std::uint64_t>(i));
  }
  const nlohmann::json decoded = nlohmann::json::from_msgpack(bytes);
  std::size_t i = 0;
  for (std::int64_t value : ints) EXPECT_EQ(decoded[i++].get<std::int64_t>(), value);
  for (std::size_t size : sizes) EXPECT_EQ(decoded[i++].get<std::string>().size(), size);
  EXPECT_EQ(decoded[i++], 0.25);
  EXPECT_TRUE(decoded[i++].is_null());
  EXPECT_EQ(decoded[i++], true);
  EXPECT_EQ(decoded[i].size(), 17u);
  EXPECT_EQ(decoded[i]["k16"], 16);
}

// Strings in the API's proto2 types are not checked for UTF-8 on the wire; nlohmann::json
// refuses to write invalid UTF-8 out, so the writer replaces each bad byte with U+FFFD, as
// Go's encoding/json does (found by transcoder_fuzz and list_decoder_fuzz).
TEST(MsgpackWriter, InvalidUtf8BecomesReplacementCharacters) {
  std::vector<std::uint8_t> bytes;
  MsgpackWriter out(bytes);
  out.String(
      "a\xff"
      "b\xe2\x82"
      "c\xc3\xa9");
  const nlohmann::json value = nlohmann::json::from_msgpack(bytes);
  EXPECT_EQ(value,
            "a\xef\xbf\xbd"
            "b\xef\xbf\xbd\xef\xbf\xbd"
            "c\xc3\xa9");
  EXPECT_NO_THROW((void)value.dump());
}

}  // namespace
}  // namespace fulcrum::kube::protobuf
