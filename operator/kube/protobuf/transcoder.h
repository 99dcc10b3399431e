// Turns a Kubernetes object in protobuf wire format into the MessagePack of its JSON form,
// the form the informer cache keeps, without building either message or JSON tree.
// Follows the API's JSON conventions: field names as in JSON, Time and MicroTime as RFC 3339,
// Quantity and IntOrString as their text or number, bytes as base64, RawExtension and FieldsV1
// as the JSON they carry, maps as objects. One difference remains and is documented: protobuf
// carries zero values ("" / 0 / false) that the JSON form omits, so they appear here.
// Pure; no I/O.
#pragma once

#include <google/protobuf/descriptor.h>

#include <string_view>

#include "common/result.h"
#include "operator/kube/protobuf/k8s_schema.h"
#include "operator/kube/protobuf/msgpack_writer.h"

namespace fulcrum::kube::protobuf {

// Appends `wire`, a message of `type`, to `out`. Fails on malformed input, naming the type.
Status TranscodeMessage(const K8sSchema& schema, const google::protobuf::Descriptor& type,
                        std::string_view wire, MsgpackWriter& out);

// Whether TranscodeMessage would succeed on `wire`: the same structural checks (bounds, wire
// types, adjacent repeated fields, nesting depth) at every level, without writing anything.
Status CheckTranscodable(const K8sSchema& schema, const google::protobuf::Descriptor& type,
                         std::string_view wire);

// Go's time.Duration text for `nanoseconds`: "0s", "1.5s", "2m3s", "1h0m0s", "300ms".
std::string GoDurationText(std::int64_t nanoseconds);

}  // namespace fulcrum::kube::protobuf
