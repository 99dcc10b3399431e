// Fuzzes the protobuf -> MessagePack transcoder on objects of the built-in types the operator
// reads (the first input byte picks the type, the rest is its wire format):
//   - CheckTranscodable and TranscodeMessage agree on what is malformed;
//   - what TranscodeMessage writes is MessagePack that nlohmann::json reads and can write out
//     as JSON text again (valid UTF-8 included), as the cache's readers do.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "operator/kube/protobuf/k8s_schema.h"
#include "operator/kube/protobuf/msgpack_writer.h"
#include "operator/kube/protobuf/transcoder.h"

namespace {

using fulcrum::kube::protobuf::K8sSchema;

constexpr std::pair<const char*, const char*> kTypes[] = {
    {"v1", "Pod"},
    {"v1", "Node"},
    {"v1", "Service"},
    {"v1", "Event"},
    {"v1", "Secret"},
    {"v1", "ConfigMap"},
    {"v1", "PodList"},
    {"coordination.k8s.io/v1", "Lease"},
    {"discovery.k8s.io/v1", "EndpointSlice"},
    {"apps/v1", "Deployment"},
    {"events.k8s.io/v1", "Event"},
};

[[noreturn]] void Violated(const char* what) {
  std::fprintf(stderr, "transcoder_fuzz: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < 1) return 0;
  const K8sSchema& schema = K8sSchema::BuiltIn();
  const auto& [api_version, kind] = kTypes[bytes[0] % std::size(kTypes)];
  const google::protobuf::Descriptor* type = schema.Find(api_version, kind);
  if (type == nullptr) Violated("a built-in type is missing from the schema");
  const std::string_view wire(reinterpret_cast<const char*>(bytes) + 1, size - 1);

  const bool checked = fulcrum::kube::protobuf::CheckTranscodable(schema, *type, wire).ok();
  std::vector<std::uint8_t> msgpack;
  fulcrum::kube::protobuf::MsgpackWriter out(msgpack);
  const bool transcoded = fulcrum::kube::protobuf::TranscodeMessage(schema, *type, wire, out).ok();
  if (checked != transcoded) Violated("CheckTranscodable and TranscodeMessage disagree");
  if (!transcoded) return 0;
  // Both throw on anything a reader of the cache could not handle.
  const nlohmann::json object = nlohmann::json::from_msgpack(msgpack);
  if (!object.is_object()) Violated("an object did not transcode to a map");
  (void)object.dump();
  return 0;
}
