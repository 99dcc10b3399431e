#include "operator/kube/protobuf/wire_reader.h"

#include <cstring>

namespace fulcrum::kube::protobuf {

std::optional<std::uint64_t> WireReader::ReadVarint(std::string_view data, std::size_t& position) {
  std::uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (position >= data.size()) return std::nullopt;
    const auto byte = static_cast<std::uint8_t>(data[position++]);
    value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return value;
  }
  return std::nullopt;
}

std::optional<std::uint32_t> WireReader::PeekNumber() const {
  std::size_t position = position_;
  const std::optional<std::uint64_t> tag = ReadVarint(data_, position);
  if (!tag) return std::nullopt;
  return static_cast<std::uint32_t>(*tag >> 3);
}

std::optional<WireField> WireReader::Next() {
  if (done() || failed_) return std::nullopt;
  const std::optional<std::uint64_t> tag = ReadVarint(data_, position_);
  if (!tag || (*tag >> 3) == 0 || (*tag >> 3) > 0x1fffffff) {
    failed_ = true;
    return std::nullopt;
  }
  WireField field;
  field.number = static_cast<std::uint32_t>(*tag >> 3);
  field.type = static_cast<WireType>(*tag & 7);
  switch (field.type) {
    case WireType::kVarint: {
      const std::optional<std::uint64_t> value = ReadVarint(data_, position_);
      if (!value) break;
      field.scalar = *value;
      return field;
    }
    case WireType::kFixed64:
    case WireType::kFixed32: {
      const std::size_t width = field.type == WireType::kFixed64 ? 8 : 4;
      if (data_.size() - position_ < width) break;
      std::uint64_t value = 0;
      std::memcpy(&value, data_.data() + position_, width);  // little-endian host
      position_ += width;
      field.scalar = value;
      return field;
    }
    case WireType::kLengthDelimited: {
      const std::optional<std::uint64_t> length = ReadVarint(data_, position_);
      if (!length || *length > data_.size() - position_) break;
      field.bytes = data_.substr(position_, *length);
      position_ += *length;
      return field;
    }
  }
  failed_ = true;  // groups (wire types 3, 4) and truncated input
  return std::nullopt;
}

}  // namespace fulcrum::kube::protobuf
