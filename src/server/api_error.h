// server: OpenAI-shaped errors. Every rejected request is answered with an HTTP status and
// {"error":{"message","type","param","code"}}; nothing a client sends can turn into a 5xx.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace dsv4::server {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;  // the offending field ("messages[2].content"), null if none
  std::string code;                  // stable machine-readable id ("invalid_type", "context_length_exceeded")
  int retry_after_s = 0;             // > 0: sent as Retry-After (429/503)

  std::string to_json() const;
};

ApiError bad_request(std::string code, std::string message, std::optional<std::string> param = std::nullopt);

// Maps an engine/tokenizer Status to the HTTP answer (kInvalidArgument/kOutOfRange → 400,
// kResourceExhausted → 503 with Retry-After, kUnimplemented → 400, everything else → 500).
ApiError api_error_from_status(const Status& s);

}  // namespace dsv4::server
