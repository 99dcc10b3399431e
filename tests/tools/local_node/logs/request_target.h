// What an HTTP request target asks the kubelet endpoint for: the route, and for
// /containerLogs the decoded names and query options. Pure, so the rules about
// paths and parameters are tested without sockets.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "tests/tools/local_node/logs/log_server.h"

namespace fulcrum::local_node {

struct RequestTarget {
  enum class Kind {
    kHealth,         // /healthz
    kContainerLogs,  // /containerLogs/{ns}/{pod}/{container}; see `logs`
    kNotSupported,   // /exec, /attach, /portForward, /run: see `feature`
    kUnknown,        // anything else (404)
  };
  Kind kind = Kind::kUnknown;
  LogRequest logs;
  std::string feature;  // kNotSupported: the path's first segment ("exec", ...)
};

// Decodes %XX escapes (and, in query strings, '+' as a space). nullopt when an
// escape is malformed.
std::optional<std::string> PercentDecode(std::string_view text, bool plus_is_space);

// Parses an origin-form target ("/path?query"). Errors are kInvalidArgument
// whose field is the query parameter at fault (the server answers 400 with the
// message): a malformed number or boolean, a negative tailLines, a limitBytes
// below 1, or timestamps/sinceSeconds/sinceTime, which this agent cannot honour.
// Unknown parameters are ignored, as kubelet does.
Result<RequestTarget> ParseRequestTarget(std::string_view target);

}  // namespace fulcrum::local_node
