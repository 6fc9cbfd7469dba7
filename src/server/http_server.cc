// server: cpp-httplib wiring. Threading: cpp-httplib's worker pool runs one handler per connection; a
// generation handler blocks on its Generation's update channel (filled by the engine thread), checking
// every poll_interval whether its client is still there, so a disconnect cancels the engine request
// within one engine step plus one poll interval.
#include "server/http_server.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>

#include "server/api_error.h"
#include "server/connection_watch.h"
#include "server/generation.h"
#include "server/listen_backlog.h"
#include "server/request_parser.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

// Compares in time that depends only on the lengths, never on where the first difference is.
bool constant_time_equal(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char ca = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char cb = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(ca ^ cb);
  }
  return diff == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.retry_after_s > 0) res.set_header("Retry-After", std::to_string(e.retry_after_s));
  res.set_content(e.to_json(), "application/json");
}

ApiError make_error(int status, const char* type, const char* code, std::string message, int retry_after = 0) {
  ApiError e;
  e.http_status = status;
  e.type = type;
  e.code = code;
  e.message = std::move(message);
  e.retry_after_s = retry_after;
  return e;
}

std::string endpoint_label(const std::string& path) {
  static const char* kKnown[] = {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"};
  for (const char* k : kKnown) {
    if (path == k) return k;
  }
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

// 404 for a model id this server does not serve.
ApiError model_not_found(std::string message) {
  ApiError e = make_error(404, "invalid_request_error", "model_not_found", std::move(message));
  e.param = "model";
  return e;
}

// The endpoint's part of a plan. Chat: thinking and tool parsing as asked, and the messages (and tools)
// rendered in the DeepSeek chat format as the prompt.
Status plan_endpoint(const ChatCompletionRequest& creq, const ChatCodec& codec, GenerationPlan* plan) {
  plan->endpoint = Endpoint::kChat;
  plan->thinking = creq.thinking;
  plan->parse_tools = !creq.tools.empty() && creq.tool_choice.kind != ToolChoiceKind::kNone;
  Result<std::vector<int32_t>> ids = codec.encode_chat(creq);
  if (!ids.is_ok()) return ids.status();
  plan->prompt_ids = std::move(ids).value();
  return Status::ok();
}

// Completions: the prompt as given token ids, or its text tokenized as it stands.
Status plan_endpoint(const CompletionRequest& creq, const ChatCodec& codec, GenerationPlan* plan) {
  plan->endpoint = Endpoint::kCompletion;
  if (creq.prompt_ids) {
    plan->prompt_ids = *creq.prompt_ids;
    return Status::ok();
  }
  Result<std::vector<int32_t>> ids = codec.encode_text(*creq.prompt_text);
  if (!ids.is_ok()) return ids.status();
  plan->prompt_ids = std::move(ids).value();
  return Status::ok();
}

// Everything both generation routes do before serving: 503 while draining, the body parsed (`parse` is
// parse_chat_request or parse_completion_request), 404 for a model this server does not serve, then the
// plan with the prompt tokenized. Returns the error to send, or fills `plan`.
template <typename Request>
std::optional<ApiError> plan_generation(
    const std::string& body, std::optional<ApiError> (*parse)(std::string_view, const RequestLimits&, Request*),
    const ServerOptions& options, bool draining, const ChatCodec& codec, GenerationPlan* plan) {
  if (draining) {
    return make_error(503, "server_overloaded", "shutting_down", "the server is shutting down", options.retry_after_s);
  }
  Request creq;
  if (auto err = parse(body, options.limits, &creq)) return err;
  if (creq.model != options.served_model_name) {
    return model_not_found("the model '" + creq.model + "' does not exist; this server serves '" +
                           options.served_model_name + "'");
  }
  plan->model = creq.model;
  plan->sampling = creq.sampling;
  if (Status st = plan_endpoint(creq, codec, plan); !st.is_ok()) return api_error_from_status(st);
  return std::nullopt;
}

// Holds admitted sequences against the server's admission limit; released when the response is gone.
class InflightTicket {
 public:
  InflightTicket(std::atomic<int64_t>& counter, int64_t n) : counter_(counter), n_(n) {}
  ~InflightTicket() { counter_.fetch_sub(n_); }
  InflightTicket(const InflightTicket&) = delete;
  InflightTicket& operator=(const InflightTicket&) = delete;

 private:
  std::atomic<int64_t>& counter_;
  int64_t n_;
};

// Everything one streaming response needs, kept alive by the content provider until the response dies.
struct StreamSession {
  std::unique_ptr<InflightTicket> ticket;
  std::unique_ptr<Generation> gen;
  std::unique_ptr<ConnectionWatch> watch;
  bool opened = false;
  bool closed = false;
};

}  // namespace

struct HttpServer::Impl {
  httplib::Server svr;
};

HttpServer::HttpServer(Engine& engine, const ChatCodec& codec, ServerOptions options)
    : impl_(std::make_unique<Impl>()), engine_(engine), codec_(codec), options_(std::move(options)) {
  if (options_.served_model_name.empty()) options_.served_model_name = engine_.info().model_name;
  if (options_.limits.vocab_size == 0) options_.limits.vocab_size = engine_.info().vocab_size;
  const int64_t engine_ctx = engine_.info().context_size;
  options_.ctx_size = options_.ctx_size > 0 ? std::min(options_.ctx_size, engine_ctx) : engine_ctx;

  httplib::Server& svr = impl_->svr;
  const int threads = options_.http_threads > 0 ? options_.http_threads
                                                : options_.max_concurrency + options_.max_queue + 8;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  svr.set_payload_max_length(options_.limits.max_body_bytes);
  svr.set_keep_alive_timeout(2);
  svr.set_read_timeout(10);
  svr.set_write_timeout(10);

  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.count_request(endpoint_label(req.path), res.status);
  });

  // Routing misses, oversized bodies (413) and anything else httplib answers itself get the same error
  // JSON as the handlers' errors. Handlers' own bodies are left alone.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const int st = res.status;
    ApiError e;
    e.http_status = st;
    if (st == 404) {
      e.code = "not_found", e.message = "no such route";
    } else if (st == 413) {
      e.code = "body_too_large", e.message = "request body exceeds the server's limit";
    } else if (st >= 500) {
      e.code = "internal_error", e.message = "internal server error", e.type = "server_error";
    } else {
      e.code = "bad_request", e.message = "bad request";
    }
    res.set_content(e.to_json(), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, make_error(500, "server_error", "internal_error", "internal server error"));
  });

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!options_.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", options_.cors_origin);
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      if (req.method == "OPTIONS") {
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (options_.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    constexpr std::string_view kBearer = "Bearer ";
    const bool ok = auth.size() > kBearer.size() && auth.compare(0, kBearer.size(), kBearer) == 0 &&
                    constant_time_equal(std::string_view(auth).substr(kBearer.size()), options_.api_key);
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e = make_error(401, "invalid_request_error", "invalid_api_key", "missing or incorrect API key");
    res.set_header("WWW-Authenticate", "Bearer");
    send_error(res, e);
    return httplib::Server::HandlerResponse::Handled;
  });

  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_header("Retry-After", std::to_string(options_.retry_after_s));
      res.set_content(R"({"status":"draining"})", "application/json");
      return;
    }
    res.set_content(R"({"status":"ok"})", "application/json");
  });

  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(engine_.stats(), inflight_.load(), draining_.load()), "text/plain; version=0.0.4");
  });

  auto model_json = [this] {
    return Json{{"id", options_.served_model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "dsv4"},
                {"max_model_len", options_.ctx_size}};
  };
  svr.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
    Json j{{"object", "list"}, {"data", Json::array({model_json()})}};
    res.set_content(j.dump(), "application/json");
  });
  svr.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != options_.served_model_name) return send_error(res, model_not_found("the model does not exist"));
    res.set_content(model_json().dump(), "application/json");
  });

  auto generation_route = [this](auto parse) {
    return [this, parse](const httplib::Request& req, httplib::Response& res) {
      GenerationPlan plan;
      if (auto err = plan_generation(req.body, parse, options_, draining_.load(), codec_, &plan)) {
        return send_error(res, *err);
      }
      serve_generation(req, res, std::move(plan));
    };
  };
  svr.Post("/v1/chat/completions", generation_route(&parse_chat_request));
  svr.Post("/v1/completions", generation_route(&parse_completion_request));
}

void HttpServer::serve_generation(const httplib::Request& req, httplib::Response& res, GenerationPlan plan) {
  // Context: prompt + max_tokens must fit; both counts are reported (reliability.md §B2).
  const int64_t prompt_len = static_cast<int64_t>(plan.prompt_ids.size());
  const int64_t ctx = options_.ctx_size;
  if (prompt_len == 0) {
    return send_error(res, bad_request("empty_prompt", "the prompt is empty", plan.endpoint == Endpoint::kChat ? "messages" : "prompt"));
  }
  if (plan.sampling.max_tokens) {
    if (prompt_len + *plan.sampling.max_tokens > ctx) {
      return send_error(res, bad_request("context_length_exceeded",
                                         "This model's maximum context length is " + std::to_string(ctx) +
                                             " tokens. However, you requested " +
                                             std::to_string(prompt_len + *plan.sampling.max_tokens) + " tokens (" +
                                             std::to_string(prompt_len) + " in the prompt, " +
                                             std::to_string(*plan.sampling.max_tokens) +
                                             " for the completion). Please reduce the prompt or max_tokens.",
                                         plan.sampling.max_tokens ? "max_tokens" : "messages"));
    }
    plan.max_tokens = static_cast<int32_t>(*plan.sampling.max_tokens);
  } else {
    if (prompt_len >= ctx) {
      return send_error(res, bad_request("context_length_exceeded",
                                         "This model's maximum context length is " + std::to_string(ctx) +
                                             " tokens. However, the prompt has " + std::to_string(prompt_len) +
                                             " tokens, leaving no room for a completion (0 completion tokens).",
                                         plan.endpoint == Endpoint::kChat ? "messages" : "prompt"));
    }
    plan.max_tokens = static_cast<int32_t>(ctx - prompt_len);
  }

  // Admission: a bounded number of sequences in flight; beyond it 429 + Retry-After, never a hang.
  const int64_t n = plan.sampling.n;
  const int64_t limit = static_cast<int64_t>(options_.max_concurrency) + options_.max_queue;
  int64_t cur = inflight_.load();
  do {
    if (cur + n > limit) {
      return send_error(res, make_error(429, "rate_limit_exceeded", "queue_full",
                                        "the server is at capacity (" + std::to_string(limit) +
                                            " sequences in flight); retry later",
                                        options_.retry_after_s));
    }
  } while (!inflight_.compare_exchange_weak(cur, cur + n));
  auto ticket = std::make_unique<InflightTicket>(inflight_, n);

  const bool stream = plan.sampling.stream;
  auto gen = std::make_unique<Generation>(engine_, codec_, metrics_, std::move(plan));
  if (auto err = gen->start()) return send_error(res, *err);
  auto watch = std::make_unique<ConnectionWatch>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);

  if (!stream) {
    while (!gen->done()) {
      gen->poll(options_.poll_interval, nullptr);
      if (watch->peer_closed()) {
        gen->cancel_all();  // nobody will read the answer
        res.status = 499;
        return;
      }
      if (force_stop_) {
        gen->cancel_all();
        return send_error(res, make_error(503, "server_overloaded", "shutting_down",
                                          "the server shut down before the request finished", options_.retry_after_s));
      }
    }
    if (gen->error()) return send_error(res, *gen->error());
    if (gen->cancelled_by_engine()) {
      return send_error(res, make_error(503, "server_overloaded", "cancelled", "the engine cancelled the request",
                                        options_.retry_after_s));
    }
    res.set_content(gen->response_body(), "application/json");
    return;
  }

  auto session = std::make_shared<StreamSession>();
  session->ticket = std::move(ticket);
  session->gen = std::move(gen);
  session->watch = std::move(watch);
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, session](size_t /*offset*/, httplib::DataSink& sink) {
        auto send = [&](const std::string& payload) {
          const std::string frame = "data: " + payload + "\n\n";
          return sink.write(frame.data(), frame.size());
        };
        auto finish_with_error = [&](const ApiError& e) {
          session->gen->cancel_all();
          // A terminal error event in the OpenAI shape, then the end marker: clients raise it as an error.
          send(e.to_json());
          send("[DONE]");
          session->closed = true;
          sink.done();
          return true;
        };
        Generation& gen = *session->gen;
        if (!session->opened) {
          session->opened = true;
          for (const auto& c : gen.opening_chunks()) {
            if (!send(c)) {
              gen.cancel_all();
              return false;
            }
          }
        }
        std::vector<std::string> chunks;
        while (true) {
          chunks.clear();
          gen.poll(options_.poll_interval, &chunks);
          for (const auto& c : chunks) {
            if (!send(c)) {
              gen.cancel_all();  // the client is gone: free the engine's state now
              return false;
            }
          }
          if (gen.done()) {
            if (gen.error()) return finish_with_error(*gen.error());
            if (gen.cancelled_by_engine()) {
              return finish_with_error(make_error(503, "server_overloaded", "cancelled",
                                                  "the request was cancelled by the server", options_.retry_after_s));
            }
            if (gen.usage_enabled() && !send(gen.usage_chunk())) return false;
            send("[DONE]");
            session->closed = true;
            sink.done();
            return true;
          }
          // A write into a closed connection can still succeed (it lands in the kernel buffer), so the
          // peer is checked on every round, not only when a write fails.
          if (session->watch->peer_closed()) {
            gen.cancel_all();
            return false;
          }
          if (force_stop_) {
            return finish_with_error(make_error(503, "server_overloaded", "shutting_down",
                                                "the server is shutting down; the stream was ended",
                                                options_.retry_after_s));
          }
          if (!chunks.empty()) return true;  // let httplib flush and call again
        }
      },
      [session](bool /*success*/) {
        // The response is finished or abandoned: anything still generating is cancelled.
        if (session->gen && !session->gen->done()) session->gen->cancel_all();
      });
}

Status HttpServer::bind() {
  if (options_.port == 0) {
    const int p = impl_->svr.bind_to_any_port(options_.host);
    if (p <= 0) return io_error("server.bind", "cannot bind " + options_.host + " to a free port");
    bound_port_ = p;
  } else {
    if (!impl_->svr.bind_to_port(options_.host, options_.port)) {
      return io_error("server.bind", "cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                                         " (in use, or not a local address?)");
    }
    bound_port_ = options_.port;
  }
  // Debian's cpp-httplib 0.11 listens with a backlog of 5 (compiled into the .so): a burst of
  // clients overflows it and, with SYN cookies, some connections are reset before the server ever
  // reads them. Re-listening on the same socket raises the backlog.
  DSV4_RETURN_IF_ERROR(raise_listen_backlog(bound_port_, kListenBacklog));
  return Status::ok();
}

void HttpServer::run() {
  in_run_ = true;
  // NOTE: skipped, the bound socket stays open until the process ends (httplib closes it only in stop(),
  // which does nothing before listen); start_background() never gets here, it waits for the listener.
  if (!stop_requested_) impl_->svr.listen_after_bind();
  in_run_ = false;
  run_returned_ = true;
}

// cpp-httplib's Server::stop() acts only once listen has marked the server running: a stop() that lands
// between start_background() and that moment is lost, and the listener then blocks in accept() forever
// (a test that fails right after starting its server hung in ~HttpServer this way). So: flag the stop
// first (a run() that has not yet begun returns at once), then wait until a run() already under way is
// really listening, then close the socket. Both flags are seq_cst, so one side always sees the other.
void HttpServer::stop_listener() {
  stop_requested_ = true;
  while (in_run_ && !impl_->svr.is_running()) std::this_thread::yield();
  if (!listener_stopped_.exchange(true)) impl_->svr.stop();
}

Status HttpServer::start_background() {
  DSV4_RETURN_IF_ERROR(bind());
  background_ = std::thread([this] { run(); });
  // Returns once the listener is up (or gave up), so a stop from here on always reaches it.
  while (!impl_->svr.is_running() && !run_returned_) std::this_thread::sleep_for(std::chrono::microseconds(100));
  return Status::ok();
}

void HttpServer::shutdown(std::chrono::milliseconds drain_timeout) {
  draining_ = true;
  const auto deadline = std::chrono::steady_clock::now() + drain_timeout;
  while (inflight_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (inflight_.load() > 0) {
    force_stop_ = true;
    // Each waiting request notices within one poll interval, cancels and answers with an error.
    const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (inflight_.load() > 0 && std::chrono::steady_clock::now() < hard) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  stop_listener();
}

// Joining the listener also joins cpp-httplib's connection workers, each bounded: a waiting generation
// sees force_stop_ within one poll interval, an idle keep-alive connection closes after the keep-alive
// timeout, a half-sent request after the read timeout (both set in the constructor).
HttpServer::~HttpServer() {
  force_stop_ = true;
  stop_listener();
  if (background_.joinable()) background_.join();
}

}  // namespace dsv4::server
