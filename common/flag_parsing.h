// Command-line number parsing shared by fulcrum-coordinator and fulcrum-trainer: strict
// (the whole text must be the number) and errors that name the flag.
#pragma once

#include <charconv>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

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

// Sets a flag's value; gets the flag's name (for errors) and the text after it.
using FlagSetter = std::function<Status(const std::string& flag, const std::string& value)>;

// A flag whose value is kept as it is.
inline FlagSetter TextFlag(std::string* out) {
  return [out](const std::string&, const std::string& value) {
    *out = value;
    return Ok();
  };
}

// A flag that takes true or false, nothing else.
inline FlagSetter BoolFlag(bool* out) {
  return [out](const std::string& flag, const std::string& value) -> Status {
    if (value != "true" && value != "false") return InvalidArgument(flag, "expected true or false");
    *out = value == "true";
    return Ok();
  };
}

// Applies "--flag value" pairs; unknown flags and missing values are errors naming the flag.
inline Status ApplyFlags(const std::vector<std::string>& args,
                         const std::map<std::string, FlagSetter>& setters) {
  for (std::size_t i = 0; i < args.size(); i += 2) {
    const auto setter = setters.find(args[i]);
    if (setter == setters.end()) return InvalidArgument(args[i], "unknown flag; see --help");
    if (i + 1 >= args.size()) return InvalidArgument(args[i], "needs a value");
    if (Status status = setter->second(args[i], args[i + 1]); !status.ok()) return status;
  }
  return Ok();
}

}  // namespace fulcrum::flags
