// Converts JSON text straight to MessagePack, without building a tree: for the JSON that
// Kubernetes objects carry inside protobuf (FieldsV1 in managedFields, RawExtension), where a
// parse into nlohmann::json and back cost a third of decoding a pod list. Pure; no I/O.
#pragma once

#include <string_view>

#include "operator/kube/protobuf/msgpack_writer.h"

namespace fulcrum::kube::protobuf {

// Appends `json` (one JSON value, whitespace allowed around tokens) to `out`. Returns false,
// writing nothing, if `json` is not valid JSON.
bool JsonToMsgpack(std::string_view json, MsgpackWriter& out);

}  // namespace fulcrum::kube::protobuf
