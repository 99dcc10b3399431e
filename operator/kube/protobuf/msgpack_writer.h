// Appends MessagePack to a byte vector, in the smallest encodings nlohmann::json's decoder
// reads. Only what transcoding Kubernetes objects needs. Pure; no I/O.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace fulcrum::kube::protobuf {

class MsgpackWriter {
 public:
  explicit MsgpackWriter(std::vector<std::uint8_t>& out) : out_(out) {}

  void Nil() { out_.push_back(0xc0); }
  void Bool(bool value) { out_.push_back(value ? 0xc3 : 0xc2); }
  void Int(std::int64_t value);
  void UInt(std::uint64_t value);
  void Double(double value);
  // Invalid UTF-8 is written with each bad byte replaced by U+FFFD.
  void String(std::string_view text);
  void ArrayHeader(std::size_t count);
  void MapHeader(std::size_t count);
  std::vector<std::uint8_t>& bytes() { return out_; }

 private:
  void BigEndian(std::uint64_t value, int width);
  void ValidString(std::string_view text);
  std::vector<std::uint8_t>& out_;
};

}  // namespace fulcrum::kube::protobuf
