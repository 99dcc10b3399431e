// Errors as values at module boundaries.
//
// C++20 has no std::expected, so Result<T> is our small stand-in: either a value
// or an Error that says what went wrong, which input (field) it concerns, and
// how to fix it. Status is Result<void>.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace fulcrum {

enum class ErrorCode {
  kInvalidArgument,  // the caller's input is wrong; the message names the field
  kNotFound,
  kAlreadyExists,
  kConflict,            // optimistic concurrency lost; re-read and retry
  kFailedPrecondition,  // valid input, but the world is not in a state to accept it
  kInfeasible,          // no answer exists for this input (e.g. batch does not fit)
  kUnauthenticated,
  kPermissionDenied,
  kResourceExhausted,
  kUnavailable,  // transient; retry with backoff
  kDeadlineExceeded,
  kExpired,  // a version or cursor is too old (HTTP 410 Gone); start over from a fresh list
  kInternal,
};

const char* ToString(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  std::string field;  // dotted path of the offending input, when there is one

  std::string ToString() const;
};

inline Error InvalidArgument(std::string field, std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message), std::move(field)};
}
inline Error MakeError(ErrorCode code, std::string message) {
  return Error{code, std::move(message), {}};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : state_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const T& value() const& {
    assert(ok());
    return std::get<0>(state_);
  }
  T& value() & {
    assert(ok());
    return std::get<0>(state_);
  }
  T&& value() && {
    assert(ok());
    return std::get<0>(std::move(state_));
  }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

  const Error& error() const {
    assert(!ok());
    return std::get<1>(state_);
  }
  // The value, or `fallback` in place of the error: for inputs whose default is as good.
  T value_or(T fallback) const& { return ok() ? value() : std::move(fallback); }

 private:
  std::variant<T, Error> state_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT: implicit by design

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    assert(!ok_);
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status Ok() {
  return Status{};
}

}  // namespace fulcrum
