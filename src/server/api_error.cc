// server: OpenAI-shaped error bodies and the Status → HTTP mapping.
#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace dsv4::server {

std::string ApiError::to_json() const {
  nlohmann::ordered_json err;
  err["message"] = message;
  err["type"] = type;
  err["param"] = param ? nlohmann::ordered_json(*param) : nlohmann::ordered_json(nullptr);
  err["code"] = code.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code);
  nlohmann::ordered_json body;
  body["error"] = std::move(err);
  // replace: a message quoting client bytes must not throw on invalid UTF-8.
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

ApiError bad_request(std::string code, std::string message, std::optional<std::string> param) {
  ApiError e;
  e.http_status = 400;
  e.code = std::move(code);
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError api_error_from_status(const Status& s) {
  ApiError e;
  e.message = s.message();
  e.code = s.rule();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented:
      e.http_status = 400;
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 503;
      e.type = "server_overloaded";
      e.retry_after_s = 1;
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace dsv4::server
