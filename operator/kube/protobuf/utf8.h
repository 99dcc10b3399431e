// UTF-8 checks for the text we put in the cache: nlohmann::json refuses to write out a string
// that is not valid UTF-8 (dump() throws), so nothing invalid may get in. Pure; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fulcrum::kube::protobuf {

// The length of the valid UTF-8 sequence (RFC 3629: shortest form, no surrogates, at most
// U+10FFFF) that starts at text[at], or 0 if none does.
inline std::size_t Utf8SequenceLength(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(text[at + i]); };
  const std::size_t left = text.size() - at;
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  // The allowed range of the second byte narrows for E0, ED, F0 and F4 (RFC 3629, table 3-7
  // of the Unicode standard): that is what rules out overlong forms, surrogates and > U+10FFFF.
  std::size_t length = 0;
  std::uint8_t low = 0x80;
  std::uint8_t high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;  // a continuation byte, C0/C1 (overlong) or F5..FF
  }
  if (left < length) return 0;
  if (byte(1) < low || byte(1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  }
  return length;
}

inline bool IsValidUtf8(std::string_view text) {
  for (std::size_t at = 0; at < text.size();) {
    if (static_cast<std::uint8_t>(text[at]) < 0x80) {
      ++at;
      continue;
    }
    const std::size_t length = Utf8SequenceLength(text, at);
    if (length == 0) return false;
    at += length;
  }
  return true;
}

// `text` with every byte that is not part of a valid sequence replaced by U+FFFD, as Go's
// encoding/json writes such strings (so the API server's JSON for the object has the same).
inline std::string CoerceToUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = Utf8SequenceLength(text, at);
    if (length == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++at;
    } else {
      out.append(text.substr(at, length));
      at += length;
    }
  }
  return out;
}

}  // namespace fulcrum::kube::protobuf
