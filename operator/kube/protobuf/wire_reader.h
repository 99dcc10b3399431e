// Reads the protocol buffers wire format field by field, without a schema: tags, varints,
// fixed-width values and length-delimited payloads as views into the input. Pure; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fulcrum::kube::protobuf {

enum class WireType : std::uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5,
};

struct WireField {
  std::uint32_t number = 0;
  WireType type = WireType::kVarint;
  std::uint64_t scalar = 0;  // varint, fixed32 or fixed64 value
  std::string_view bytes;    // length-delimited payload
};

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool done() const { return position_ >= data_.size(); }
  // The next field, or nullopt at the end or on malformed input (then failed() is true).
  std::optional<WireField> Next();
  // The number of the field Next() would return, without consuming it.
  std::optional<std::uint32_t> PeekNumber() const;
  bool failed() const { return failed_; }
  // Bytes consumed so far.
  std::size_t position() const { return position_; }

  // A varint from `data` at `position` (advanced); nullopt if truncated or too long.
  static std::optional<std::uint64_t> ReadVarint(std::string_view data, std::size_t& position);

 private:
  std::string_view data_;
  std::size_t position_ = 0;
  bool failed_ = false;
};

}  // namespace fulcrum::kube::protobuf
