// server/testing: a model-free dsv4::Engine for the server's tests. It behaves like the real engine at
// the interface: its own loop thread, a bounded queue, admission limited by a block pool (reserved for
// prompt + max_tokens), cancellation applied at the start of the next step, stop strings matched on
// the detokenized text across token boundaries. What it "generates" is a text chosen per request by a
// script (the test hook for injecting completions, e.g. DSML tool calls), cut into byte-level tokens.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4::server::testing {

struct FakeEngineOptions {
  int64_t context_size = 4096;
  int64_t vocab_size = 129280;
  int32_t max_running = 64;      // sequences decoded per step
  int32_t max_queued = 256;      // submit beyond this → kResourceExhausted
  int64_t pool_blocks = 4096;
  int32_t block_tokens = 16;
  std::chrono::microseconds step_time{500};  // sleep per engine step (paces streaming in tests)
  std::string model_name = "fake-dsv4";
};

class FakeEngine final : public Engine {
 public:
  // Returns the full completion text for a request (the engine then applies max_tokens / stop strings).
  using Script = std::function<std::string(const GenerationRequest&)>;

  explicit FakeEngine(FakeEngineOptions options = {});
  ~FakeEngine() override;

  Result<RequestId> submit(GenerationRequest request, UpdateCallback on_update) override;
  void cancel(RequestId id) override;
  EngineStats stats() const override;
  const EngineInfo& info() const override { return info_; }

  // Test hooks. The default script derives its text deterministically from the prompt ids (and the seed
  // when temperature > 0), so equal requests give equal outputs, alone or concurrently.
  void set_script(Script script);
  // Holds every request in the queue (nothing is admitted) while true: lets tests fill the queue.
  void set_paused(bool paused);
  int64_t cancels_applied() const;   // cancel() calls that removed a live request
  int64_t submitted() const;
  GenerationRequest last_request() const;

  // The byte-level "tokenization" the fake uses: markers like "</think>" and "｜DSML｜" are single tokens,
  // everything else is cut into 1..3-byte pieces. Exposed so tests can predict token counts.
  static std::vector<std::string> split_tokens(const std::string& text);
  static std::string default_text(const GenerationRequest& request);

 private:
  struct Sequence {
    RequestId id = 0;
    GenerationRequest request;
    UpdateCallback on_update;
    std::vector<std::string> pieces;  // the scripted completion, tokenized
    size_t next_piece = 0;
    int64_t blocks = 0;
    std::string text;       // detokenized output so far (for stop-string matching)
    size_t released = 0;    // bytes of `text` already handed out
    int32_t generated = 0;
  };

  void loop();
  // One decode step for `seq`: appends its update to `out`; returns true when the sequence finished.
  bool step_sequence(Sequence& seq, std::vector<std::pair<UpdateCallback, GenerationUpdate>>* out);

  FakeEngineOptions options_;
  EngineInfo info_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool paused_ = false;
  RequestId next_id_ = 1;
  Script script_;
  std::deque<Sequence> queue_;
  std::map<RequestId, Sequence> running_;
  std::set<RequestId> cancel_requests_;
  int64_t free_blocks_ = 0;
  int64_t prompt_tokens_total_ = 0;
  int64_t generated_tokens_total_ = 0;
  int64_t cancels_applied_ = 0;
  int64_t submitted_ = 0;
  GenerationRequest last_request_;
  std::thread thread_;
};

}  // namespace dsv4::server::testing
