// Public API: the inference engine as the server (and any embedder) sees it. Token ids in, token
// events out; no tensors, no JSON. One engine loop thread owns the model; callbacks run on it and must
// be quick (hand the event to another thread).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace dsv4 {

using RequestId = uint64_t;

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = 0;         // 0 = off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  std::optional<uint64_t> seed;  // same seed -> same output, alone or in a batch
  int32_t top_logprobs = -1;     // -1: no logprobs; 0..20: chosen token's logprob + that many alternatives
};

struct StopCriteria {
  int32_t max_tokens = 256;
  std::vector<int32_t> stop_token_ids;    // in addition to the model's EOS
  std::vector<std::string> stop_strings;  // matched on detokenized text, across token boundaries
  bool ignore_eos = false;
};

struct GenerationRequest {
  std::vector<int32_t> prompt_ids;
  SamplingParams sampling;
  StopCriteria stop;
};

enum class FinishReason { kNone, kStop, kLength, kCancelled, kError };

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// A token that ends generation (EOS or a stop id) is reported too, with empty text of its own; any text
// held back while it could have begun a stop string is released on the last event of the request.
struct TokenEvent {
  int32_t token = 0;
  std::string text;  // complete UTF-8 released by this token (may be empty while a character is split)
  std::optional<TokenLogprob> logprob;
  std::vector<TokenLogprob> top_logprobs;
};

// Delivered on the engine thread: zero or more new tokens, and a finish reason on the last update.
struct GenerationUpdate {
  RequestId id = 0;
  std::vector<TokenEvent> tokens;
  FinishReason finish = FinishReason::kNone;
  Status error;  // set when finish == kError
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
};

using UpdateCallback = std::function<void(const GenerationUpdate&)>;

struct EngineStats {
  int64_t queued = 0;
  int64_t running = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int64_t pool_blocks_total = 0;
  int64_t pool_blocks_free = 0;
  double spec_acceptance = 0.0;
  // Added by the runtime (all optional to read):
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prefix_cache_hits = 0;
  int64_t prefix_cache_hit_tokens = 0;
  std::vector<double> spec_acceptance_by_position;  // [k]: accepted / proposed at draft position i
  int64_t state_bytes_in_use = 0;                   // live sequences and cached prefixes, all state kinds
  int64_t state_bytes_budget = 0;
  // The paged compressed-KV stores (FP8 rows, FP4 indexer keys) as they really are (pages shared by
  // prefix reuse count once).
  int64_t kv_pages_in_use = 0;
  int64_t kv_page_bytes_in_use = 0;
  int64_t kv_page_bytes_held = 0;  // allocated, in use or free for reuse
  // The other paged state kinds: window rows (FP8) and compressor partial-block rows (fp32). With the
  // compressed stores they make up state_bytes_in_use when the model's pages are real.
  int64_t window_page_bytes_in_use = 0;
  int64_t window_page_bytes_held = 0;
  int64_t partial_page_bytes_in_use = 0;
  int64_t partial_page_bytes_held = 0;
  // Step scratch (activation buffers) the process holds: large after a long prefill, given back a few
  // decode steps later.
  int64_t scratch_bytes_held = 0;
};

struct EngineInfo {
  std::string model_name;
  int64_t context_size = 0;
  int64_t vocab_size = 0;
  int32_t eos_token_id = 1;
  int32_t bos_token_id = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Queues a request. kResourceExhausted when the queue is full (the server answers 429/503), kOutOfRange
  // when prompt + max_tokens exceeds the context.
  virtual Result<RequestId> submit(GenerationRequest request, UpdateCallback on_update) = 0;
  // Cancels a queued or running request; its state is freed within one engine step. Idempotent.
  virtual void cancel(RequestId id) = 0;
  virtual EngineStats stats() const = 0;
  virtual const EngineInfo& info() const = 0;
};

}  // namespace dsv4
