// Turns an API server response that is not 2xx into an Error, keeping what a
// caller acts on: the kind of failure (NotFound, Conflict, Invalid with its
// field, Expired for 410...), the server's message, and Retry-After.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace fulcrum::kube {

struct ApiFailure {
  Error error;
  int http_status = 0;
  std::string reason;                               // metav1.Status reason, e.g. "AlreadyExists"
  std::optional<std::chrono::seconds> retry_after;  // from the header or status.details
};

// `body` is the response body (usually a metav1.Status JSON); `retry_after_header`
// the Retry-After header if any. Never fails: unknown shapes become kInternal/kUnavailable.
ApiFailure DecodeApiFailure(int http_status, std::string_view body,
                            std::string_view retry_after_header,
                            std::string_view request_description);

}  // namespace fulcrum::kube
