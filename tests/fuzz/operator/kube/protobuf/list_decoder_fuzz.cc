// Fuzzes the protobuf list decoder with whole response bodies: the body decodes the same
// fed at once or in pieces (the first input byte sets the piece size), and every item it
// passes on can be turned into JSON text, as the cache and the controllers later do.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "operator/kube/cache/cached_object.h"
#include "operator/kube/protobuf/list_decoder.h"

namespace {

using fulcrum::kube::CachedObject;
using fulcrum::kube::protobuf::K8sSchema;

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "list_decoder_fuzz: %s\n", what);
  std::abort();
}

// Throws (so libFuzzer reports it) if the item cannot be written out as JSON.
std::string Text(const CachedObject& item) {
  return item.ToJson().dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  const std::size_t piece = bytes[0] % 64 + 1;
  const std::string_view body(reinterpret_cast<const char*>(bytes) + 1, size - 1);
  const K8sSchema& schema = K8sSchema::BuiltIn();

  std::vector<std::string> whole;
  auto list = fulcrum::kube::protobuf::DecodeList(
      schema, body, [&](CachedObject item) { whole.push_back(Text(item)); });

  std::vector<std::string> pieces;
  fulcrum::kube::protobuf::ListDecoder decoder(
      schema, [&](CachedObject item) { pieces.push_back(Text(item)); });
  bool fed = true;
  for (std::size_t at = 0; at < body.size() && fed; at += piece) {
    fed = decoder.Feed(body.substr(at, piece)).ok();
  }
  const bool pieces_ok = fed && decoder.Finish().ok();
  if (pieces_ok != list.ok()) Violated("whole and piecewise decoding disagree on success");
  if (list.ok() && pieces != whole) Violated("whole and piecewise decoding gave other items");
  return 0;
}
