// server: untrusted request bodies → validated plain structs (api_types.h). Every check of
// reliability.md §B1/§B2 that does not need the tokenizer or the engine happens here: JSON syntax and
// depth, field types, ranges, limits. The prompt-length check happens after rendering (http_server.cc).
#pragma once

#include <optional>
#include <string_view>

#include "server/api_error.h"
#include "server/api_types.h"
#include "server/limits.h"

namespace dsv4::server {

// Each returns nullopt and fills `out`, or the 4xx error to send.
std::optional<ApiError> parse_chat_request(std::string_view body, const RequestLimits& limits,
                                           ChatCompletionRequest* out);
std::optional<ApiError> parse_completion_request(std::string_view body, const RequestLimits& limits,
                                                 CompletionRequest* out);

}  // namespace dsv4::server
