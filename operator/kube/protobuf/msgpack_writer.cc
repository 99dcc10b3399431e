#include "operator/kube/protobuf/msgpack_writer.h"

#include <bit>
#include <cstring>

#include "operator/kube/protobuf/utf8.h"

namespace fulcrum::kube::protobuf {

void MsgpackWriter::BigEndian(std::uint64_t value, int width) {
  for (int shift = (width - 1) * 8; shift >= 0; shift -= 8) {
    out_.push_back(static_cast<std::uint8_t>(value >> shift));
  }
}

void MsgpackWriter::UInt(std::uint64_t value) {
  if (value < 128) {
    out_.push_back(static_cast<std::uint8_t>(value));
  } else if (value <= 0xff) {
    out_.push_back(0xcc);
    BigEndian(value, 1);
  } else if (value <= 0xffff) {
    out_.push_back(0xcd);
    BigEndian(value, 2);
  } else if (value <= 0xffffffffULL) {
    out_.push_back(0xce);
    BigEndian(value, 4);
  } else {
    out_.push_back(0xcf);
    BigEndian(value, 8);
  }
}

void MsgpackWriter::Int(std::int64_t value) {
  if (value >= 0) return UInt(static_cast<std::uint64_t>(value));
  const auto bits = static_cast<std::uint64_t>(value);
  if (value >= -32) {
    out_.push_back(static_cast<std::uint8_t>(bits));  // negative fixint
  } else if (value >= INT8_MIN) {
    out_.push_back(0xd0);
    BigEndian(bits, 1);
  } else if (value >= INT16_MIN) {
    out_.push_back(0xd1);
    BigEndian(bits, 2);
  } else if (value >= INT32_MIN) {
    out_.push_back(0xd2);
    BigEndian(bits, 4);
  } else {
    out_.push_back(0xd3);
    BigEndian(bits, 8);
  }
}

void MsgpackWriter::Double(double value) {
  out_.push_back(0xcb);
  BigEndian(std::bit_cast<std::uint64_t>(value), 8);
}

void MsgpackWriter::String(std::string_view text) {
  // Strings of the proto2 API types are not checked for UTF-8 on the wire, and nlohmann::json
  // will not write invalid UTF-8 out again: coerce it here, as Go's encoding/json does, so
  // that every object in the cache can be serialised.
  if (!IsValidUtf8(text)) {
    const std::string valid = CoerceToUtf8(text);
    ValidString(valid);
    return;
  }
  ValidString(text);
}

void MsgpackWriter::ValidString(std::string_view text) {
  const std::size_t size = text.size();
  if (size < 32) {
    out_.push_back(static_cast<std::uint8_t>(0xa0 | size));
  } else if (size <= 0xff) {
    out_.push_back(0xd9);
    BigEndian(size, 1);
  } else if (size <= 0xffff) {
    out_.push_back(0xda);
    BigEndian(size, 2);
  } else {
    out_.push_back(0xdb);
    BigEndian(size, 4);
  }
  out_.insert(out_.end(), text.begin(), text.end());
}

void MsgpackWriter::ArrayHeader(std::size_t count) {
  if (count < 16) {
    out_.push_back(static_cast<std::uint8_t>(0x90 | count));
  } else if (count <= 0xffff) {
    out_.push_back(0xdc);
    BigEndian(count, 2);
  } else {
    out_.push_back(0xdd);
    BigEndian(count, 4);
  }
}

void MsgpackWriter::MapHeader(std::size_t count) {
  if (count < 16) {
    out_.push_back(static_cast<std::uint8_t>(0x80 | count));
  } else if (count <= 0xffff) {
    out_.push_back(0xde);
    BigEndian(count, 2);
  } else {
    out_.push_back(0xdf);
    BigEndian(count, 4);
  }
}

}  // namespace fulcrum::kube::protobuf
