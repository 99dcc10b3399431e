// Fuzzes the JSON -> MessagePack converter (the JSON that objects carry inside protobuf:
// FieldsV1, RawExtension) against nlohmann::json's own parser:
//   - it accepts exactly what nlohmann accepts as one JSON value (RFC 8259, UTF-8 included);
//   - what it writes reads back, with nlohmann's MessagePack reader, as the same value, and
//     that value can be written out as JSON text again.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "operator/kube/protobuf/json_to_msgpack.h"
#include "operator/kube/protobuf/msgpack_writer.h"

namespace {

[[noreturn]] void Violated(const std::string& what, std::string_view input) {
  std::fprintf(stderr, "json_to_msgpack_fuzz: %s for input of %zu bytes\n", what.c_str(),
               input.size());
  std::abort();
}

// The deepest nesting of arrays and objects in `text`, outside strings.
int MaxDepth(std::string_view text) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  std::vector<std::uint8_t> msgpack;
  fulcrum::kube::protobuf::MsgpackWriter out(msgpack);
  const bool converted = fulcrum::kube::protobuf::JsonToMsgpack(text, out);
  if (!converted && !msgpack.empty()) Violated("wrote bytes for rejected JSON", text);

  const nlohmann::json reference = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  // nlohmann has no nesting limit; ours stops at 256 levels, so deeper documents are left
  // out of the comparison.
  const bool deep = MaxDepth(text) > 200;
  // nlohmann's lexer takes a NUL byte for the end of the input, so it accepts `1\0junk`.
  const bool nul = text.find('\0') != std::string_view::npos;
  if (!deep && !nul && converted != !reference.is_discarded()) {
    Violated(converted ? "accepted what nlohmann rejects" : "rejected what nlohmann accepts", text);
  }
  if (!converted) return 0;
  const nlohmann::json decoded = nlohmann::json::from_msgpack(msgpack);
  // Numbers may differ in kind (nlohmann keeps 1.0 a float; MessagePack may carry it as
  // either), so compare the JSON text of both after a round trip through double for floats.
  if (!reference.is_discarded() && decoded != reference &&
      nlohmann::json::parse(decoded.dump()) != nlohmann::json::parse(reference.dump())) {
    Violated("MessagePack reads back as another value", text);
  }
  (void)decoded.dump();
  return 0;
}
