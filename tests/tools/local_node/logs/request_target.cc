#include "tests/tools/local_node/logs/request_target.h"

#include <array>
#include <charconv>
#include <cstdint>
#include <vector>

namespace fulcrum::local_node {
namespace {

std::optional<int> HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

std::vector<std::string_view> Split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

struct QueryParameter {
  std::string name;
  std::string value;
};

Result<std::vector<QueryParameter>> ParseQuery(std::string_view query) {
  std::vector<QueryParameter> parameters;
  if (query.empty()) return parameters;
  for (std::string_view pair : Split(query, '&')) {
    if (pair.empty()) continue;
    const size_t equals = pair.find('=');
    const std::string_view raw_name = pair.substr(0, equals);
    const std::string_view raw_value =
        equals == std::string_view::npos ? std::string_view{} : pair.substr(equals + 1);
    std::optional<std::string> name = PercentDecode(raw_name, /*plus_is_space=*/true);
    std::optional<std::string> value = PercentDecode(raw_value, /*plus_is_space=*/true);
    if (!name || !value) {
      return InvalidArgument(std::string(raw_name), "query parameter \"" + std::string(pair) +
                                                        "\" has a malformed %-escape");
    }
    parameters.push_back({std::move(*name), std::move(*value)});
  }
  return parameters;
}

// Like Go's url.Values.Get, which kubelet uses: the first occurrence wins.
const std::string* FindParameter(const std::vector<QueryParameter>& parameters,
                                 std::string_view name) {
  for (const QueryParameter& parameter : parameters) {
    if (parameter.name == name) return &parameter.value;
  }
  return nullptr;
}

// strconv.ParseBool's spellings; a bare `?follow` (empty value) means true, as
// kubelet's query conversion reads it.
Result<bool> ParseBoolean(std::string_view name, const std::string& value) {
  static constexpr std::array<std::string_view, 7> kTrue = {"",     "1",    "t",   "T",
                                                            "true", "TRUE", "True"};
  static constexpr std::array<std::string_view, 6> kFalse = {"0",     "f",     "F",
                                                             "false", "FALSE", "False"};
  for (std::string_view spelling : kTrue) {
    if (value == spelling) return true;
  }
  for (std::string_view spelling : kFalse) {
    if (value == spelling) return false;
  }
  return InvalidArgument(std::string(name),
                         std::string(name) + " must be true or false, got \"" + value + "\"");
}

Result<std::int64_t> ParseInteger(std::string_view name, const std::string& value) {
  std::int64_t number = 0;
  const char* end = value.data() + value.size();
  const auto [stop, error] = std::from_chars(value.data(), end, number);
  if (value.empty() || error != std::errc{} || stop != end) {
    return InvalidArgument(std::string(name),
                           std::string(name) + " must be a whole number, got \"" + value + "\"");
  }
  return number;
}

Status RefuseTimeFilters(const std::vector<QueryParameter>& parameters) {
  if (const std::string* timestamps = FindParameter(parameters, "timestamps")) {
    Result<bool> wanted = ParseBoolean("timestamps", *timestamps);
    if (!wanted.ok()) return wanted.error();
    if (*wanted) {
      return InvalidArgument(
          "timestamps",
          "timestamps is not supported by fulcrum-local-node: its log files carry no per-line "
          "timestamps; leave out --timestamps");
    }
  }
  for (std::string_view name : {"sinceSeconds", "sinceTime"}) {
    const std::string* value = FindParameter(parameters, name);
    if (value != nullptr && !value->empty()) {
      return InvalidArgument(std::string(name),
                             std::string(name) +
                                 " is not supported by fulcrum-local-node: its log files carry no "
                                 "per-line timestamps, so it cannot tell when a line was written; "
                                 "use --tail instead of --since/--since-time");
    }
  }
  return Ok();
}

Status ParseLogOptions(std::string_view query, LogRequest& request) {
  Result<std::vector<QueryParameter>> parameters = ParseQuery(query);
  if (!parameters.ok()) return parameters.error();
  if (Status refused = RefuseTimeFilters(*parameters); !refused.ok()) return refused;

  for (auto [name, flag] :
       {std::pair{"follow", &request.follow}, std::pair{"previous", &request.previous}}) {
    if (const std::string* value = FindParameter(*parameters, name)) {
      Result<bool> parsed = ParseBoolean(name, *value);
      if (!parsed.ok()) return parsed.error();
      *flag = *parsed;
    }
  }
  if (const std::string* value = FindParameter(*parameters, "tailLines")) {
    Result<std::int64_t> lines = ParseInteger("tailLines", *value);
    if (!lines.ok()) return lines.error();
    if (*lines < 0) {
      return InvalidArgument("tailLines", "tailLines must be 0 or more, got " + *value);
    }
    request.tail_lines = *lines;
  }
  if (const std::string* value = FindParameter(*parameters, "limitBytes")) {
    Result<std::int64_t> bytes = ParseInteger("limitBytes", *value);
    if (!bytes.ok()) return bytes.error();
    if (*bytes < 1) {
      return InvalidArgument("limitBytes", "limitBytes must be 1 or more, got " + *value);
    }
    request.limit_bytes = *bytes;
  }
  return Ok();
}

bool IsUnsupportedStreamingFeature(std::string_view segment) {
  return segment == "exec" || segment == "attach" || segment == "portForward" || segment == "run";
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space) {
  std::string decoded;
  decoded.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      decoded.push_back(' ');
    } else if (c != '%') {
      decoded.push_back(c);
    } else {
      if (i + 2 >= text.size()) return std::nullopt;  // "%" or "%A" at the end
      const std::optional<int> high = HexValue(text[i + 1]);
      const std::optional<int> low = HexValue(text[i + 2]);
      if (!high || !low) return std::nullopt;
      decoded.push_back(static_cast<char>(*high * 16 + *low));
      i += 2;
    }
  }
  return decoded;
}

Result<RequestTarget> ParseRequestTarget(std::string_view target) {
  const size_t question = target.find('?');
  const std::string_view path = target.substr(0, question);
  const std::string_view query =
      question == std::string_view::npos ? std::string_view{} : target.substr(question + 1);

  RequestTarget parsed;
  if (path.empty() || path.front() != '/') return parsed;  // kUnknown
  if (path == "/healthz") {
    parsed.kind = RequestTarget::Kind::kHealth;
    return parsed;
  }

  const std::vector<std::string_view> segments = Split(path.substr(1), '/');
  if (IsUnsupportedStreamingFeature(segments.front())) {
    parsed.kind = RequestTarget::Kind::kNotSupported;
    parsed.feature = std::string(segments.front());
    return parsed;
  }
  if (segments.front() != "containerLogs" || segments.size() != 4) return parsed;

  std::array<std::string, 3> names;
  for (size_t i = 0; i < names.size(); ++i) {
    std::optional<std::string> name = PercentDecode(segments[i + 1], /*plus_is_space=*/false);
    if (!name) {
      return InvalidArgument(
          "path", "path segment \"" + std::string(segments[i + 1]) + "\" has a malformed %-escape");
    }
    if (name->empty()) return parsed;  // "/containerLogs/ns//c" names no pod: kUnknown
    names[i] = std::move(*name);
  }
  parsed.kind = RequestTarget::Kind::kContainerLogs;
  parsed.logs.ns = std::move(names[0]);
  parsed.logs.pod = std::move(names[1]);
  parsed.logs.container = std::move(names[2]);
  if (Status options = ParseLogOptions(query, parsed.logs); !options.ok()) return options.error();
  return parsed;
}

}  // namespace fulcrum::local_node
