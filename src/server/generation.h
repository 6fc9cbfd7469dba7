// server: one admitted HTTP generation request — its n engine requests, the channel their updates
// arrive on (engine thread → HTTP worker), per-choice output parsing, and the OpenAI response/chunk JSON.
// The HTTP layer drives it with poll(); destroying it cancels whatever is still running.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "dsv4/engine.h"
#include "server/api_error.h"
#include "server/api_types.h"
#include "server/chat_codec.h"
#include "server/metrics.h"

namespace dsv4::server {

enum class Endpoint { kChat, kCompletion };

// What the HTTP layer decided for a validated request.
struct GenerationPlan {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<int32_t> prompt_ids;
  ApiSampling sampling;
  int32_t max_tokens = 1;
  bool thinking = false;     // output starts as reasoning
  bool parse_tools = false;  // DSML becomes tool_calls
};

// Engine updates for the choices of one request. Shared with the engine callbacks, so it outlives the
// Generation if the engine still holds a callback.
class UpdateChannel {
 public:
  void push(int choice, GenerationUpdate update);
  // Waits until at least one update is queued or `timeout` passes; moves out everything queued.
  std::vector<std::pair<int, GenerationUpdate>> wait(std::chrono::milliseconds timeout);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int, GenerationUpdate>> queue_;
};

class Generation {
 public:
  Generation(Engine& engine, const ChatCodec& codec, Metrics& metrics, GenerationPlan plan);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits the n engine requests. On failure nothing stays submitted.
  std::optional<ApiError> start();
  // Processes the updates that arrive within `timeout`. In streaming mode, appends the JSON of each
  // chunk to send (without the "data: " framing).
  void poll(std::chrono::milliseconds timeout, std::vector<std::string>* chunks);
  bool done() const;
  void cancel_all();

  // Streaming: the chunks to send before any token (the assistant role per choice).
  std::vector<std::string> opening_chunks() const;
  // Streaming with include_usage: the final chunk with empty choices and the usage.
  std::string usage_chunk() const;
  bool usage_enabled() const { return plan_.sampling.include_usage; }
  // Non-streaming: the whole response body.
  std::string response_body() const;
  // Set when the engine ended a choice with an error, or cancelled it without being asked (shutdown).
  const std::optional<ApiError>& error() const { return error_; }
  bool cancelled_by_engine() const { return cancelled_by_engine_; }

 private:
  struct ToolCallState {
    std::string id;
    std::string name;
    std::string arguments;
  };
  struct Choice {
    RequestId engine_id = 0;
    bool submitted = false;
    bool finished = false;
    std::unique_ptr<OutputParser> parser;
    std::string content;
    std::string reasoning;
    std::vector<ToolCallState> tool_calls;
    std::string finish_reason;
    int32_t completion_tokens = 0;
    int32_t reasoning_tokens = 0;
    std::vector<TokenEvent> logprob_tokens;  // non-streaming logprobs
    std::chrono::steady_clock::time_point last_token;
    bool got_token = false;
  };

  void handle_update(int index, const GenerationUpdate& u, std::vector<std::string>* chunks);
  // Merges a parser delta into the choice; returns the chunk delta JSON (chat) or text (completion).
  void apply_delta(int index, const OutputDelta& d, const std::vector<TokenEvent>& tokens,
                   std::vector<std::string>* chunks);
  std::string chunk_json(int index, const std::string& delta_json_or_text, const std::vector<TokenEvent>& tokens,
                         const char* finish_reason) const;
  // The fields every response and chunk opens with: id, object (a chunk's or a whole response's), created, model.
  nlohmann::ordered_json envelope(bool chunk) const;
  // A choice's logprobs object in the endpoint's shape; tokens non-empty.
  nlohmann::ordered_json logprobs_json(const std::vector<TokenEvent>& tokens) const;
  nlohmann::ordered_json usage_json() const;

  Engine& engine_;
  const ChatCodec& codec_;
  Metrics& metrics_;
  GenerationPlan plan_;
  std::shared_ptr<UpdateChannel> channel_;
  std::vector<Choice> choices_;
  std::string id_;
  int64_t created_ = 0;
  std::chrono::steady_clock::time_point start_time_;
  bool first_token_seen_ = false;
  std::optional<ApiError> error_;
  bool cancelled_by_engine_ = false;
  bool cancel_requested_ = false;
};

}  // namespace dsv4::server
