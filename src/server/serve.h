// server: what `dsv4 serve` runs — the backend (engine + chat codec) for a model directory, and the
// serve loop that handles SIGTERM/SIGINT with a graceful drain.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "dsv4/engine.h"
#include "model/model.h"
#include "server/chat_codec.h"
#include "server/http_server.h"

namespace dsv4::server {

struct ServeBackend {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ChatCodec> codec;
};

struct BackendOptions {
  std::string model_dir;
  int32_t max_concurrency = 16;  // sequences run at once; the state pool fits this many full contexts
  int32_t max_queue = 64;        // requests the engine accepts beyond those
  int64_t ctx_size = 0;          // 0: the model's max context; larger than it is an error
  // Per-sequence state the engine may hold (admission and the model's page pools); 0: room for
  // max_concurrency full contexts in admission's plan, the pools unbounded.
  int64_t state_budget_bytes = 0;
  int32_t prefix_cache_entries = 0;  // finished sequences kept for prefix reuse
  std::string served_model_name; // the engine's model name
  bool progress_bar = true;      // loading progress on stderr
  ModelOptions model;            // backend, threads, ISA (the progress hook is set here)
};

// The real engine (runtime ModelModelRunner + create_engine, greedy/sampled, no speculation) and the
// DeepSeek-V4 chat codec over MODEL_DIR/tokenizer.json. Everything that can be checked cheaply (the
// directory, config.json, tokenizer.json, --ctx-size against the model) is checked before the weights
// are read; every failure is a Status naming the path and the fix, never a crash.
Result<ServeBackend> load_model_backend(const BackendOptions& options);

// Blocks SIGTERM, SIGINT (and ignores SIGPIPE) in the calling thread; call it before any other thread
// starts, so the threads created later inherit the mask and only serve_until_signal() receives them.
void block_shutdown_signals();

// Binds, prints "listening on http://HOST:PORT" to stdout, serves until SIGTERM or SIGINT, then drains
// (HttpServer::shutdown) within `drain_timeout` and returns.
Status serve_until_signal(Engine& engine, const ChatCodec& codec, const ServerOptions& options,
                          std::chrono::milliseconds drain_timeout);

}  // namespace dsv4::server
