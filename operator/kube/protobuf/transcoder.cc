#include "operator/kube/protobuf/transcoder.h"

#include <absl/strings/escaping.h>
#include <google/protobuf/descriptor.pb.h>

#include <algorithm>
#include <bit>
#include <bitset>
#include <cstring>
#include <string>
#include <vector>

#include "common/rfc3339.h"
#include "operator/kube/protobuf/json_to_msgpack.h"
#include "operator/kube/protobuf/wire_reader.h"

namespace fulcrum::kube::protobuf {
namespace {
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

constexpr int kMaxMessageDepth = 64;  // Kubernetes objects nest ~10 deep; guards hostile input

Error Malformed(const Descriptor& type, std::string_view why) {
  return MakeError(ErrorCode::kInternal,
                   "protobuf " + type.full_name() + " is malformed: " + std::string(why));
}

std::string Base64(std::string_view bytes) {
  return absl::Base64Escape(absl::string_view(bytes.data(), bytes.size()));
}

bool WireTypeFits(const FieldDescriptor& field, WireType wire) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return wire == WireType::kLengthDelimited;
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
      return wire == WireType::kFixed64;
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return wire == WireType::kFixed32;
    case FieldDescriptor::TYPE_GROUP:
      return false;
    default:
      return wire == WireType::kVarint;
  }
}

// One scalar (already checked against the field's wire type).
void WriteScalar(const FieldDescriptor& field, std::uint64_t value, MsgpackWriter& out) {
  switch (field.type()) {
    case FieldDescriptor::TYPE_BOOL:
      return out.Bool(value != 0);
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_FIXED64:
      return out.UInt(value);
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SINT64:
      return out.Int(static_cast<std::int64_t>(value >> 1) ^ -static_cast<std::int64_t>(value & 1));
    case FieldDescriptor::TYPE_SFIXED32:
      return out.Int(static_cast<std::int32_t>(static_cast<std::uint32_t>(value)));
    case FieldDescriptor::TYPE_DOUBLE:
      return out.Double(std::bit_cast<double>(value));
    case FieldDescriptor::TYPE_FLOAT:
      return out.Double(std::bit_cast<float>(static_cast<std::uint32_t>(value)));
    case FieldDescriptor::TYPE_INT32:
      return out.Int(static_cast<std::int32_t>(static_cast<std::uint32_t>(value)));
    default:
      return out.Int(static_cast<std::int64_t>(value));  // int64, sfixed64, enum
  }
}

// The fields of one message in wire order. Kubernetes' Go marshaller writes a repeated field's
// elements one after another and a singular field once; the transcoder relies on that
// (MessagePack wants each map's and array's length up front), so a field that comes back after
// another one is refused, and so is a singular field written twice (protobuf would merge or
// overwrite; counting it once and writing it twice made MessagePack that did not decode).
class FieldOrder {
 public:
  // True if `field` starts a new field, false if it continues the previous (repeated) one; an
  // error if it repeats a field that another one interrupted, or a singular one.
  Result<bool> Next(const Descriptor& type, const FieldDescriptor& field) {
    const auto number = static_cast<std::uint32_t>(field.number());
    if (number == last_) {
      if (!field.is_repeated()) return Malformed(type, field.name() + " appears more than once");
      return false;
    }
    last_ = number;
    if (number < seen_.size()) {
      if (seen_[number]) return Malformed(type, "a repeated field's elements are not adjacent");
      seen_[number] = true;
    }
    return true;
  }
  // A field the schema does not know (newer than it) still interrupts a run: the transcoder
  // skips it, and the elements after it would start a second key for the same field.
  void Unknown(std::uint32_t number) { last_ = number; }

 private:
  std::bitset<1024> seen_;
  std::uint32_t last_ = 0;
};

class Writer {
 public:
  Writer(const K8sSchema& schema, MsgpackWriter& out) : schema_(schema), out_(out) {}

  Status Message(const Descriptor& type, std::string_view wire, int depth) {
    if (depth > kMaxMessageDepth) return Malformed(type, "nested too deeply");
    const MessageInfo& info = schema_.InfoOf(&type);
    if (info.special != SpecialType::kNone) return Special(type, info.special, wire);
    // MessagePack needs the number of keys first.
    Result<std::size_t> keys = CountKeys(type, wire, depth);
    if (!keys.ok()) return keys.error();
    out_.MapHeader(*keys);
    return Members(type, wire, depth);
  }

 private:
  // One key per field present (a repeated field's elements arrive one after another, as
  // Kubernetes' Go marshaller writes them); an inlined field counts its own keys.
  Result<std::size_t> CountKeys(const Descriptor& type, std::string_view wire, int depth) {
    if (depth > kMaxMessageDepth) return Malformed(type, "nested too deeply");
    const MessageInfo& info = schema_.InfoOf(&type);
    std::size_t keys = 0;
    FieldOrder order;
    WireReader counter(wire);
    while (std::optional<WireField> field = counter.Next()) {
      const FieldDescriptor* descriptor = info.Field(field->number);
      if (descriptor == nullptr) {  // a field newer than our schema
        order.Unknown(field->number);
        continue;
      }
      Result<bool> starts = order.Next(type, *descriptor);
      if (!starts.ok()) return starts.error();
      if (!*starts) continue;  // more of the same repeated field
      if (info.Inline(field->number) && field->type == WireType::kLengthDelimited) {
        Result<std::size_t> inner = CountKeys(*descriptor->message_type(), field->bytes, depth + 1);
        if (!inner.ok()) return inner.error();
        keys += *inner;
      } else {
        ++keys;
      }
    }
    if (counter.failed()) return Malformed(type, "truncated or invalid wire data");
    return keys;
  }

  // The key/value pairs of `type`'s fields (without the map header).
  Status Members(const Descriptor& type, std::string_view wire, int depth) {
    const MessageInfo& info = schema_.InfoOf(&type);
    WireReader reader(wire);
    while (std::optional<WireField> first = reader.Next()) {
      const FieldDescriptor* field = info.Field(first->number);
      if (field == nullptr) continue;
      if (info.Inline(first->number) && first->type == WireType::kLengthDelimited) {
        if (Status status = Members(*field->message_type(), first->bytes, depth + 1);
            !status.ok()) {
          return status;
        }
        continue;
      }
      out_.String(info.JsonName(*field));
      if (!field->is_repeated()) {
        if (!WireTypeFits(*field, first->type))
          return Malformed(type, "wrong wire type for " + field->name());
        if (Status status = Value(*field, *first, depth); !status.ok()) return status;
        continue;
      }
      // One reusable buffer per depth: repeated fields are everywhere, allocations add up.
      if (elements_by_depth_.size() <= static_cast<std::size_t>(depth))
        elements_by_depth_.resize(depth + 1);
      std::vector<WireField>& elements = elements_by_depth_[static_cast<std::size_t>(depth)];
      elements.assign(1, *first);
      while (reader.PeekNumber() == first->number) elements.push_back(*reader.Next());
      if (Status status = Repeated(type, *field, elements, depth); !status.ok()) return status;
    }
    if (reader.failed()) return Malformed(type, "truncated or invalid wire data");
    return Ok();
  }

  Status Value(const FieldDescriptor& field, const WireField& value, int depth) {
    switch (field.type()) {
      case FieldDescriptor::TYPE_STRING:
        out_.String(value.bytes);
        return Ok();
      case FieldDescriptor::TYPE_BYTES:
        out_.String(Base64(value.bytes));
        return Ok();
      case FieldDescriptor::TYPE_MESSAGE:
        return Message(*field.message_type(), value.bytes, depth + 1);
      default:
        WriteScalar(field, value.scalar, out_);
        return Ok();
    }
  }

  Status Repeated(const Descriptor& type, const FieldDescriptor& field,
                  const std::vector<WireField>& elements, int depth) {
    if (field.is_map()) {
      out_.MapHeader(elements.size());
      const Descriptor& entry = *field.message_type();
      const FieldDescriptor* key_field = entry.map_key();
      const FieldDescriptor* value_field = entry.map_value();
      for (const WireField& element : elements) {
        if (element.type != WireType::kLengthDelimited)
          return Malformed(type, "bad map entry in " + field.name());
        std::optional<WireField> key;
        std::optional<WireField> value;
        WireReader reader(element.bytes);
        while (std::optional<WireField> part = reader.Next()) {
          if (part->number == 1) key = part;
          if (part->number == 2) value = part;
        }
        if (reader.failed()) return Malformed(entry, "truncated or invalid wire data");
        if (key && !WireTypeFits(*key_field, key->type))
          return Malformed(entry, "wrong wire type for key");
        if (value && !WireTypeFits(*value_field, value->type))
          return Malformed(entry, "wrong wire type for value");
        if (key_field->type() == FieldDescriptor::TYPE_STRING) {
          out_.String(key ? key->bytes : std::string_view());
        } else {
          WriteScalar(*key_field, key ? key->scalar : 0, out_);
        }
        if (value) {
          if (Status status = Value(*value_field, *value, depth); !status.ok()) return status;
        } else if (Status status =
                       Value(*value_field, WireField{2, WireType::kLengthDelimited, 0, {}}, depth);
                   !status.ok()) {
          return status;  // absent value: the type's zero value
        }
      }
      return Ok();
    }
    if (!field.is_packable()) {
      out_.ArrayHeader(elements.size());
      for (const WireField& element : elements) {
        if (!WireTypeFits(field, element.type))
          return Malformed(type, "wrong wire type for " + field.name());
        if (Status status = Value(field, element, depth); !status.ok()) return status;
      }
      return Ok();
    }
    // Scalars may come packed (one length-delimited run) or one by one.
    std::vector<std::uint64_t> values;
    for (const WireField& element : elements) {
      if (element.type != WireType::kLengthDelimited) {
        if (!WireTypeFits(field, element.type))
          return Malformed(type, "wrong wire type for " + field.name());
        values.push_back(element.scalar);
        continue;
      }
      std::size_t position = 0;
      const std::string_view run = element.bytes;
      while (position < run.size()) {
        const bool fixed64 = WireTypeFits(field, WireType::kFixed64);
        const bool fixed32 = WireTypeFits(field, WireType::kFixed32);
        if (fixed64 || fixed32) {
          const std::size_t width = fixed64 ? 8 : 4;
          if (run.size() - position < width)
            return Malformed(type, "truncated packed " + field.name());
          std::uint64_t value = 0;
          std::memcpy(&value, run.data() + position, width);
          position += width;
          values.push_back(value);
        } else {
          const std::optional<std::uint64_t> value = WireReader::ReadVarint(run, position);
          if (!value) return Malformed(type, "truncated packed " + field.name());
          values.push_back(*value);
        }
      }
    }
    out_.ArrayHeader(values.size());
    for (std::uint64_t value : values) WriteScalar(field, value, out_);
    return Ok();
  }

  Status Special(const Descriptor& type, SpecialType special, std::string_view wire) {
    // Field 1 and 2 as the special types define them.
    std::uint64_t first_scalar = 0;
    std::uint64_t second_scalar = 0;
    std::string_view first_bytes;
    std::string_view third_bytes;
    std::size_t strings = 0;  // occurrences of field 1 (a kStringList's items)
    WireReader reader(wire);
    while (std::optional<WireField> field = reader.Next()) {
      if (field->number == 1) {
        first_scalar = field->scalar;
        first_bytes = field->bytes;
        if (field->type == WireType::kLengthDelimited) ++strings;
      } else if (field->number == 2) {
        second_scalar = field->scalar;
      } else if (field->number == 3) {
        third_bytes = field->bytes;
      }
    }
    if (reader.failed()) return Malformed(type, "truncated or invalid wire data");
    switch (special) {
      case SpecialType::kTime:
      case SpecialType::kMicroTime:
        // Go marshals the zero time as an empty message; its JSON is null.
        if (wire.empty()) {
          out_.Nil();
        } else {
          // A Timestamp's nanos lie in [0, 1e9); hostile ones are clamped there.
          out_.String(
              FormatRfc3339(static_cast<std::int64_t>(first_scalar),
                            std::clamp(static_cast<std::int32_t>(second_scalar), 0, 999'999'999),
                            special == SpecialType::kMicroTime ? TimePrecision::kMicroseconds
                                                               : TimePrecision::kSeconds));
        }
        return Ok();
      case SpecialType::kDuration:
        out_.String(GoDurationText(static_cast<std::int64_t>(first_scalar)));
        return Ok();
      case SpecialType::kQuantity:
        out_.String(first_bytes.empty() ? std::string_view("0") : first_bytes);
        return Ok();
      case SpecialType::kIntOrString:
        if (first_scalar == 1) {
          out_.String(third_bytes);
        } else {
          out_.Int(static_cast<std::int32_t>(static_cast<std::uint32_t>(second_scalar)));
        }
        return Ok();
      case SpecialType::kRawJson: {
        if (first_bytes.empty()) {
          out_.Nil();
          return Ok();
        }
        if (!JsonToMsgpack(first_bytes, out_)) {
          out_.String(Base64(first_bytes));  // not JSON (a protobuf-encoded extension)
        }
        return Ok();
      }
      case SpecialType::kStringList: {
        out_.ArrayHeader(strings);
        WireReader items(wire);
        while (std::optional<WireField> field = items.Next()) {
          if (field->number == 1 && field->type == WireType::kLengthDelimited)
            out_.String(field->bytes);
        }
        return Ok();
      }
      case SpecialType::kNone:
        break;
    }
    return Ok();
  }

  const K8sSchema& schema_;
  MsgpackWriter& out_;
  std::vector<std::vector<WireField>> elements_by_depth_;
};

// Go's fmtFrac: the fraction of `value` below `precision` digits, trailing zeros dropped.
void AppendFraction(std::string& text, std::uint64_t& value, int precision) {
  std::string digits;
  bool print = false;
  for (int i = 0; i < precision; ++i) {
    const std::uint64_t digit = value % 10;
    print = print || digit != 0;
    if (print) digits.insert(digits.begin(), static_cast<char>('0' + digit));
    value /= 10;
  }
  if (print) text = "." + digits + text;
}

Status CheckMessage(const K8sSchema& schema, const Descriptor& type, std::string_view wire,
                    int depth) {
  // A map entry is read as Writer::Repeated reads it: the last key and value win, and the value
  // counts as nested once, not twice.
  if (type.options().map_entry()) {
    std::optional<WireField> key;
    std::optional<WireField> value;
    WireReader reader(wire);
    while (std::optional<WireField> part = reader.Next()) {
      if (part->number == 1) key = part;
      if (part->number == 2) value = part;
    }
    if (reader.failed()) return Malformed(type, "truncated or invalid wire data");
    if (key && !WireTypeFits(*type.map_key(), key->type))
      return Malformed(type, "wrong wire type for key");
    if (value && !WireTypeFits(*type.map_value(), value->type))
      return Malformed(type, "wrong wire type for value");
    if (value && type.map_value()->type() == FieldDescriptor::TYPE_MESSAGE)
      return CheckMessage(schema, *type.map_value()->message_type(), value->bytes, depth);
    return Ok();
  }
  if (depth > kMaxMessageDepth) return Malformed(type, "nested too deeply");
  const MessageInfo& info = schema.InfoOf(&type);
  if (info.special != SpecialType::kNone) {
    // Writer::Special reads fields 1 to 3 in any order and wire type, the last one winning.
    WireReader reader(wire);
    while (reader.Next()) {
    }
    if (reader.failed()) return Malformed(type, "truncated or invalid wire data");
    return Ok();
  }
  FieldOrder order;
  WireReader reader(wire);
  while (std::optional<WireField> field = reader.Next()) {
    const FieldDescriptor* descriptor = info.Field(field->number);
    if (descriptor == nullptr) {
      order.Unknown(field->number);
      continue;
    }
    if (Result<bool> starts = order.Next(type, *descriptor); !starts.ok()) return starts.error();
    const bool packed = descriptor->is_packable() && field->type == WireType::kLengthDelimited;
    if (!packed && !WireTypeFits(*descriptor, field->type)) {
      return Malformed(type, "wrong wire type for " + descriptor->name());
    }
    if (descriptor->type() == FieldDescriptor::TYPE_MESSAGE) {
      if (Status status =
              CheckMessage(schema, *descriptor->message_type(), field->bytes, depth + 1);
          !status.ok()) {
        return status;
      }
    }
  }
  if (reader.failed()) return Malformed(type, "truncated or invalid wire data");
  return Ok();
}
}  // namespace

Status CheckTranscodable(const K8sSchema& schema, const Descriptor& type, std::string_view wire) {
  return CheckMessage(schema, type, wire, 0);
}

Status TranscodeMessage(const K8sSchema& schema, const Descriptor& type, std::string_view wire,
                        MsgpackWriter& out) {
  return Writer(schema, out).Message(type, wire, 0);
}

std::string GoDurationText(std::int64_t nanoseconds) {
  if (nanoseconds == 0) return "0s";
  const bool negative = nanoseconds < 0;
  std::uint64_t value = negative ? 0 - static_cast<std::uint64_t>(nanoseconds)
                                 : static_cast<std::uint64_t>(nanoseconds);
  std::string text;  // built from the right, as Go does
  if (value < 1'000'000'000) {
    // Below a second: the largest of ns, µs, ms that keeps a whole part.
    int precision = 0;
    std::string unit;
    if (value < 1'000) {
      unit = "ns";
    } else if (value < 1'000'000) {
      precision = 3;
      unit = "\u00b5s";
    } else {
      precision = 6;
      unit = "ms";
    }
    text = unit;
    AppendFraction(text, value, precision);
    text = std::to_string(value) + text;
  } else {
    text = "s";
    AppendFraction(text, value, 9);
    text = std::to_string(value % 60) + text;
    value /= 60;
    if (value > 0) {
      text = std::to_string(value % 60) + "m" + text;
      value /= 60;
      if (value > 0) text = std::to_string(value) + "h" + text;
    }
  }
  return negative ? "-" + text : text;
}

}  // namespace fulcrum::kube::protobuf
