#include "common/result.h"

namespace fulcrum {

const char* ToString(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "InvalidArgument";
    case ErrorCode::kNotFound: return "NotFound";
    case ErrorCode::kAlreadyExists: return "AlreadyExists";
    case ErrorCode::kConflict: return "Conflict";
    case ErrorCode::kFailedPrecondition: return "FailedPrecondition";
    case ErrorCode::kInfeasible: return "Infeasible";
    case ErrorCode::kUnauthenticated: return "Unauthenticated";
    case ErrorCode::kPermissionDenied: return "PermissionDenied";
    case ErrorCode::kResourceExhausted: return "ResourceExhausted";
    case ErrorCode::kUnavailable: return "Unavailable";
    case ErrorCode::kDeadlineExceeded: return "DeadlineExceeded";
    case ErrorCode::kExpired: return "Expired";
    case ErrorCode::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Error::ToString() const {
  std::string text = fulcrum::ToString(code);
  if (!field.empty()) text += " (" + field + ")";
  text += ": " + message;
  return text;
}

}  // namespace fulcrum
