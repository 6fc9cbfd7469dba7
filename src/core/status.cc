// core: Status formatting.
#include "core/status.h"

namespace dsv4 {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kInvalidFile: return "invalid_file";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kIoError: return "io_error";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string s(status_code_name(code_));
  if (!rule_.empty()) s += " [" + rule_ + "]";
  s += ": " + message_;
  return s;
}

}  // namespace dsv4
