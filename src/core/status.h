// core: recoverable errors as values. Every boundary (file/config load, request validation, pool
// exhaustion) returns Status or Result<T>; a bad file or request never aborts the process.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"

namespace dsv4 {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // caller passed a bad value (CLI flag, request field)
  kInvalidFile,        // an untrusted file (checkpoint, config, tokenizer) breaks a format rule
  kNotFound,           // file, tensor or model missing
  kIoError,            // the OS refused (open, mmap, read, write)
  kOutOfRange,         // a value outside what the engine supports (context length, ids)
  kResourceExhausted,  // pools or queues full: back-pressure, retry later
  kUnimplemented,      // a valid input this build does not support (said explicitly, never silently)
  kCancelled,
  kInternal,
};

std::string_view status_code_name(StatusCode code);

// A Status carries a code, a stable machine-readable `rule` ("safetensors.header_too_large") so tests
// and callers can tell errors apart without parsing prose, and a human message naming the file/tensor.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string rule, std::string message)
      : code_(code), rule_(std::move(rule)), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& rule() const { return rule_; }
  const std::string& message() const { return message_; }
  // "invalid_file [safetensors.header_too_large]: model.safetensors: header length ..."
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string rule_;
  std::string message_;
};

inline Status invalid_argument(std::string rule, std::string message) {
  return {StatusCode::kInvalidArgument, std::move(rule), std::move(message)};
}
inline Status invalid_file(std::string rule, std::string message) {
  return {StatusCode::kInvalidFile, std::move(rule), std::move(message)};
}
inline Status not_found(std::string rule, std::string message) {
  return {StatusCode::kNotFound, std::move(rule), std::move(message)};
}
inline Status io_error(std::string rule, std::string message) {
  return {StatusCode::kIoError, std::move(rule), std::move(message)};
}
inline Status out_of_range(std::string rule, std::string message) {
  return {StatusCode::kOutOfRange, std::move(rule), std::move(message)};
}
inline Status unimplemented(std::string rule, std::string message) {
  return {StatusCode::kUnimplemented, std::move(rule), std::move(message)};
}
inline Status resource_exhausted(std::string rule, std::string message) {
  return {StatusCode::kResourceExhausted, std::move(rule), std::move(message)};
}
inline Status internal_error(std::string rule, std::string message) {
  return {StatusCode::kInternal, std::move(rule), std::move(message)};
}

// Result<T>: a value or a non-ok Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    DSV4_CHECK(!std::get<Status>(v_).is_ok(), "Result constructed from an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return is_ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & {
    DSV4_CHECK(is_ok(), "Result::value() on error: " + status().to_string());
    return std::get<T>(v_);
  }
  const T& value() const& {
    DSV4_CHECK(is_ok(), "Result::value() on error: " + status().to_string());
    return std::get<T>(v_);
  }
  T&& value() && {
    DSV4_CHECK(is_ok(), "Result::value() on error: " + status().to_string());
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace dsv4

// Propagate a non-ok Status from an expression returning Status.
#define DSV4_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::dsv4::Status dsv4_status_ = (expr);          \
    if (!dsv4_status_.is_ok()) return dsv4_status_; \
  } while (0)

#define DSV4_CONCAT_INNER_(a, b) a##b
#define DSV4_CONCAT_(a, b) DSV4_CONCAT_INNER_(a, b)
// DSV4_ASSIGN_OR_RETURN(auto x, make_x()); — binds the value or returns the error.
#define DSV4_ASSIGN_OR_RETURN(lhs, expr) \
  DSV4_ASSIGN_OR_RETURN_IMPL_(DSV4_CONCAT_(dsv4_result_, __LINE__), lhs, expr)
#define DSV4_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.is_ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
