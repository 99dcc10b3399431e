// Command-line number parsing shared by fulcrum-coordinator and fulcrum-trainer: strict
// (the whole text must be the number) and errors that name the flag.
#pragma once

#include <charconv>
#include <string>

#include "operator/common/result.h"

namespace fulcrum::flags {

template <typename Number>
Status ParseNumber(const std::string& flag, const std::string& text, Number* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(text.data(), end, *out);
  if (error != std::errc() || ptr != end) {
    return InvalidArgument(flag, "expected a number, got \"" + text + "\"");
  }
  return Ok();
}

}  // namespace fulcrum::flags
