#include "operator/kube/rest/api_error.h"

#include <nlohmann/json.hpp>

namespace fulcrum::kube {
namespace {

ErrorCode CodeFor(int http_status, const std::string& reason) {
  if (reason == "AlreadyExists") return ErrorCode::kAlreadyExists;
  if (reason == "Conflict") return ErrorCode::kConflict;
  if (reason == "Invalid" || reason == "BadRequest") return ErrorCode::kInvalidArgument;
  if (reason == "Expired" || reason == "Gone") return ErrorCode::kExpired;
  switch (http_status) {
    case 400:
      return ErrorCode::kInvalidArgument;
    case 401:
      return ErrorCode::kUnauthenticated;
    case 403:
      return ErrorCode::kPermissionDenied;
    case 404:
      return ErrorCode::kNotFound;
    case 409:
      return ErrorCode::kConflict;
    case 410:
      return ErrorCode::kExpired;
    case 422:
      return ErrorCode::kInvalidArgument;
    case 429:
      return ErrorCode::kResourceExhausted;
    case 504:
      return ErrorCode::kDeadlineExceeded;
    default:
      break;
  }
  return http_status >= 500 ? ErrorCode::kUnavailable : ErrorCode::kInternal;
}

// A string field of a JSON object, "" when absent or of another type: a server, a proxy or a
// fuzzer may send anything in a Status.
std::string TextField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return {};
  const auto field = object.find(key);
  return field != object.end() && field->is_string() ? field->get<std::string>() : std::string();
}

}  // namespace

ApiFailure DecodeApiFailure(int http_status, std::string_view body,
                            std::string_view retry_after_header,
                            std::string_view request_description) {
  ApiFailure failure;
  failure.http_status = http_status;
  std::string message;
  std::string field;
  const nlohmann::json status = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (TextField(status, "kind") == "Status") {
    failure.reason = TextField(status, "reason");
    message = TextField(status, "message");
    if (const auto details = status.find("details");
        details != status.end() && details->is_object()) {
      if (const auto causes = details->find("causes");
          causes != details->end() && causes->is_array()) {
        for (const auto& cause : *causes) {
          if (field.empty()) field = TextField(cause, "field");
        }
      }
      if (const auto seconds = details->find("retryAfterSeconds");
          seconds != details->end() && seconds->is_number_integer() &&
          seconds->get<int64_t>() >= 0 && seconds->get<int64_t>() <= 3600) {
        failure.retry_after = std::chrono::seconds(seconds->get<int64_t>());
      }
    }
  } else {
    message = std::string(body.substr(0, 300));
  }
  if (!retry_after_header.empty()) {
    try {
      failure.retry_after = std::chrono::seconds(std::stoi(std::string(retry_after_header)));
    } catch (const std::exception&) {
      // An HTTP-date Retry-After; the caller's own backoff applies.
    }
  }
  failure.error.code = CodeFor(http_status, failure.reason);
  failure.error.field = field;
  failure.error.message = std::string(request_description) + ": HTTP " +
                          std::to_string(http_status) +
                          (failure.reason.empty() ? "" : " " + failure.reason) +
                          (message.empty() ? "" : ": " + message);
  return failure;
}

}  // namespace fulcrum::kube
