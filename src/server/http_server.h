// server: the OpenAI-compatible HTTP front end. Routes (/v1/chat/completions, /v1/completions,
// /v1/models, /health, /metrics), admission control, authentication, SSE streaming and graceful
// shutdown. It owns no model: requests go to a dsv4::Engine, whose loop thread does the work.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "core/status.h"
#include "dsv4/engine.h"
#include "server/chat_codec.h"
#include "server/limits.h"
#include "server/metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace dsv4::server {

struct GenerationPlan;

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked: an open port is an open model
  int port = 8000;                 // 0: an ephemeral port (tests)
  std::string api_key;             // non-empty: every route but /health needs "Authorization: Bearer <key>"
  std::string served_model_name;   // the one model id clients may ask for; empty: the engine's name
  int64_t ctx_size = 0;            // 0: the engine's context size; else min(engine, this)
  int32_t max_concurrency = 16;    // sequences the engine runs at once (admission counts against it)
  int32_t max_queue = 64;          // sequences allowed to wait beyond that; more → 429 + Retry-After
  int32_t retry_after_s = 1;
  int32_t http_threads = 0;        // 0: max_concurrency + max_queue + 8, so waiting never blocks accept
  std::string cors_origin;         // non-empty: CORS headers for this origin ("*" allowed); off by default
  std::chrono::milliseconds poll_interval{20};  // how often a waiting request checks its client is alive
  RequestLimits limits;
};

class HttpServer {
 public:
  HttpServer(Engine& engine, const ChatCodec& codec, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; afterwards port() is the real port (for port 0).
  Status bind();
  int port() const { return bound_port_; }
  // Serves until shutdown() (blocks the calling thread). Returns at once if shutdown() came first.
  void run();
  // bind() + run() on a background thread; returns once it listens.
  Status start_background();

  // Graceful shutdown (SIGTERM): new requests get 503 + Retry-After at once; running requests may finish
  // within `drain_timeout`; after it, the rest are cancelled and open streams end with a terminal error
  // event. Then the listener stops. Safe to call from any thread, once or more.
  void shutdown(std::chrono::milliseconds drain_timeout);
  bool draining() const { return draining_.load(); }
  int64_t inflight_sequences() const { return inflight_.load(); }

 private:
  // Context check, admission, then the streaming or the blocking answer.
  void serve_generation(const httplib::Request& req, httplib::Response& res, GenerationPlan plan);
  // Closes the listening socket so run() returns, whenever it is called relative to run() (once).
  void stop_listener();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  Engine& engine_;
  const ChatCodec& codec_;
  ServerOptions options_;
  Metrics metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> force_stop_{false};
  std::atomic<int64_t> inflight_{0};
  std::atomic<bool> stop_requested_{false};  // stop_listener() was called
  std::atomic<bool> in_run_{false};          // run() is between its entry and its return
  std::atomic<bool> run_returned_{false};
  std::atomic<bool> listener_stopped_{false};
  int bound_port_ = -1;
  std::thread background_;
};

}  // namespace dsv4::server
