#include "operator/kube/protobuf/list_decoder.h"

#include <vector>

#include "operator/kube/protobuf/msgpack_writer.h"
#include "operator/kube/protobuf/transcoder.h"
#include "operator/kube/protobuf/wire_reader.h"

namespace fulcrum::kube::protobuf {
namespace {
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr std::string_view kMagic{"k8s\0", 4};

Error Bad(std::string_view what) {
  return MakeError(ErrorCode::kInternal, "protobuf list response: " + std::string(what));
}

// The payload of field `number` of the (flat) message `wire`, or "" if absent.
std::string_view BytesField(std::string_view wire, std::uint32_t number) {
  WireReader reader(wire);
  std::string_view found;
  while (std::optional<WireField> field = reader.Next()) {
    if (field->number == number && field->type == WireType::kLengthDelimited) found = field->bytes;
  }
  return found;
}
}  // namespace

Result<ObjectIdentity> DecodeIdentity(const K8sSchema& schema, std::string_view object_meta) {
  const ObjectMetaFields& fields = schema.object_meta_fields();
  if (fields.name < 0) return Bad("the schema has no ObjectMeta");
  ObjectIdentity identity;
  WireReader reader(object_meta);
  while (std::optional<WireField> field = reader.Next()) {
    if (field->type != WireType::kLengthDelimited) continue;
    const auto number = static_cast<int>(field->number);
    if (number == fields.name) {
      identity.name = field->bytes;
    } else if (number == fields.ns) {
      identity.ns = field->bytes;
    } else if (number == fields.uid) {
      identity.uid = field->bytes;
    } else if (number == fields.resource_version) {
      identity.resource_version = field->bytes;
    } else if (number == fields.labels) {
      identity.labels.emplace_back(BytesField(field->bytes, 1), BytesField(field->bytes, 2));
    } else if (number == fields.owner_references) {
      identity.owner_uids.emplace_back(
          BytesField(field->bytes, static_cast<std::uint32_t>(fields.owner_uid)));
    }
  }
  if (reader.failed()) return Bad("an item's metadata is malformed");
  return identity;
}

ListDecoder::ListDecoder(const K8sSchema& schema, std::function<void(CachedObject)> on_item)
    : schema_(schema), on_item_(std::move(on_item)) {}

Status ListDecoder::Feed(std::string_view bytes) {
  // Drop what was consumed before appending, so the buffer holds about one read's worth.
  if (offset_ > 0) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  buffer_.append(bytes);
  while (true) {
    Result<bool> progressed = Step();
    if (!progressed.ok()) return progressed.error();
    if (!*progressed) return Ok();
  }
}

Result<ListMetadata> ListDecoder::Finish() {
  if (stage_ == Stage::kEnvelope && offset_ == buffer_.size())
    return Bad("the envelope carries no list");
  if (stage_ != Stage::kTrailer || offset_ != buffer_.size()) {
    return Bad("the response ended early" + (list_.kind.empty() ? "" : " (in " + list_.kind + ")"));
  }
  return std::move(list_);
}

Status ListDecoder::StartList() {
  const Descriptor* type = schema_.Find(list_.api_version, list_.kind);
  if (type == nullptr) return Bad("unknown type " + list_.api_version + " " + list_.kind);
  const FieldDescriptor* items = type->FindFieldByName("items");
  const FieldDescriptor* metadata = type->FindFieldByName("metadata");
  if (items == nullptr || metadata == nullptr || items->message_type() == nullptr) {
    return Bad(list_.kind + " is not a list type");
  }
  item_type_ = items->message_type();
  const FieldDescriptor* item_metadata = item_type_->FindFieldByName("metadata");
  if (item_metadata == nullptr) return Bad(item_type_->full_name() + " has no metadata");
  items_number_ = items->number();
  metadata_number_ = metadata->number();
  item_metadata_number_ = static_cast<std::uint32_t>(item_metadata->number());
  return Ok();
}

Status ListDecoder::Item(std::string_view wire) {
  Result<ObjectIdentity> identity =
      DecodeIdentity(schema_, BytesField(wire, item_metadata_number_));
  if (!identity.ok()) return identity.error();
  // Kept as the protobuf the server sent, transcoded when read: after checking that it would
  // transcode (a counting pass over every level, far cheaper than writing the JSON form).
  if (Status status = CheckTranscodable(schema_, *item_type_, wire); !status.ok()) return status;
  on_item_(CachedObject::FromProtobuf(std::move(*identity), item_type_, wire));
  return Ok();
}

Result<bool> ListDecoder::Step() {
  const std::string_view rest = std::string_view(buffer_).substr(offset_);
  if (stage_ == Stage::kMagic) {
    if (rest.size() < kMagic.size()) {
      if (!kMagic.starts_with(rest)) return Bad("does not start with the k8s protobuf magic");
      return false;
    }
    if (!rest.starts_with(kMagic)) return Bad("does not start with the k8s protobuf magic");
    offset_ += kMagic.size();
    stage_ = Stage::kEnvelope;
    return true;
  }
  if (rest.empty()) return false;
  // Every field here is a tag, then (for what we read) a length and a payload.
  std::size_t position = 0;
  const std::optional<std::uint64_t> tag = WireReader::ReadVarint(rest, position);
  if (!tag)
    return rest.size() >= 10 ? Result<bool>(Bad("malformed field tag")) : Result<bool>(false);
  const auto number = static_cast<std::uint32_t>(*tag >> 3);
  const auto wire_type = static_cast<WireType>(*tag & 7);
  std::uint64_t length = 0;
  if (wire_type == WireType::kLengthDelimited) {
    const std::optional<std::uint64_t> size = WireReader::ReadVarint(rest, position);
    if (!size)
      return rest.size() >= 20 ? Result<bool>(Bad("malformed length")) : Result<bool>(false);
    length = *size;
  } else if (stage_ != Stage::kList) {
    return Bad("unexpected field type in the envelope");
  }
  // runtime.Unknown: 1 typeMeta {1 apiVersion, 2 kind}, 2 raw (the list), 3 contentEncoding,
  // 4 contentType. The list itself is decoded field by field as it arrives.
  if (stage_ == Stage::kEnvelope && number == 2) {
    if (list_.kind.empty()) return Bad("the list arrived before its type");
    if (Status status = StartList(); !status.ok()) return status.error();
    offset_ += position;
    list_left_ = length;
    stage_ = list_left_ == 0 ? Stage::kTrailer : Stage::kList;
    return true;
  }
  if (stage_ == Stage::kList && wire_type != WireType::kLengthDelimited) {
    // A scalar in the list message (none exist today): skip it whole.
    WireReader reader(rest);
    if (!reader.Next())
      return rest.size() >= 20 ? Result<bool>(Bad("malformed field")) : Result<bool>(false);
    position = reader.position();
  }
  if (rest.size() - position < length) return false;  // wait for the whole field
  const std::string_view payload = rest.substr(position, length);
  const std::size_t consumed = position + length;
  if (stage_ == Stage::kList) {
    if (consumed > list_left_) return Bad(list_.kind + " overruns its envelope");
    if (static_cast<int>(number) == items_number_ && wire_type == WireType::kLengthDelimited) {
      if (Status status = Item(payload); !status.ok()) return status.error();
    } else if (static_cast<int>(number) == metadata_number_) {
      // ListMeta: 2 resourceVersion, 3 continue.
      list_.resource_version = BytesField(payload, 2);
      list_.continue_token = BytesField(payload, 3);
    }
    list_left_ -= consumed;
    if (list_left_ == 0) stage_ = Stage::kTrailer;
  } else if (number == 1) {
    list_.api_version = BytesField(payload, 1);
    list_.kind = BytesField(payload, 2);
  } else if (number == 3 && !payload.empty()) {
    return Bad("content encoding '" + std::string(payload) + "' is not supported");
  }
  offset_ += consumed;
  return true;
}

Result<ListMetadata> DecodeList(const K8sSchema& schema, std::string_view body,
                                const std::function<void(CachedObject)>& on_item) {
  ListDecoder decoder(schema, on_item);
  if (Status status = decoder.Feed(body); !status.ok()) return status.error();
  return decoder.Finish();
}

}  // namespace fulcrum::kube::protobuf
