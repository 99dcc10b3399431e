// Decodes a list response in Kubernetes' protobuf encoding ("k8s\0", then a runtime.Unknown
// whose raw bytes are e.g. a PodList) into cache objects, one item at a time. Pure; no I/O.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "operator/kube/cache/cached_object.h"
#include "operator/kube/protobuf/k8s_schema.h"

namespace fulcrum::kube::protobuf {

// The media type to ask for, and to recognise in Content-Type.
inline constexpr std::string_view kProtobufMediaType = "application/vnd.kubernetes.protobuf";

struct ListMetadata {
  std::string api_version;  // of the list, e.g. "v1"
  std::string kind;         // e.g. "PodList"
  std::string resource_version;
  std::string continue_token;
};

// Decodes a list response fed in pieces as it arrives, calling `on_item` for each item as soon
// as its bytes are complete: the decoding overlaps the download, and at most one item beyond
// what has been decoded is held. Errors name the list type.
class ListDecoder {
 public:
  ListDecoder(const K8sSchema& schema, std::function<void(CachedObject)> on_item);

  Status Feed(std::string_view bytes);
  // After the last Feed: the list's metadata, or an error if the response was cut short.
  Result<ListMetadata> Finish();

 private:
  enum class Stage { kMagic, kEnvelope, kList, kTrailer };
  // Consumes what can be consumed from buffer_; false = wait for more bytes.
  Result<bool> Step();
  Status Item(std::string_view wire);
  Status StartList();

  const K8sSchema& schema_;
  std::function<void(CachedObject)> on_item_;
  std::string buffer_;
  std::size_t offset_ = 0;       // bytes of buffer_ already consumed
  std::uint64_t list_left_ = 0;  // bytes of the list message not yet consumed
  Stage stage_ = Stage::kMagic;
  ListMetadata list_;
  const google::protobuf::Descriptor* item_type_ = nullptr;
  int items_number_ = 0;
  int metadata_number_ = 0;
  std::uint32_t item_metadata_number_ = 0;
};

// The whole body at once.
Result<ListMetadata> DecodeList(const K8sSchema& schema, std::string_view body,
                                const std::function<void(CachedObject)>& on_item);

// The identity fields of an ObjectMeta in wire format.
Result<ObjectIdentity> DecodeIdentity(const K8sSchema& schema, std::string_view object_meta);

}  // namespace fulcrum::kube::protobuf
