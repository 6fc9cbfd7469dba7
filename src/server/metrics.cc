// server: Prometheus text format (version 0.0.4) rendering.
#include "server/metrics.h"

#include <cstdio>
#include <string>
#include <tuple>

namespace dsv4::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void gauge(std::string* out, const char* name, const char* help, double v, const std::string& labels = "") {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n";
  *out += std::string(name) + labels + " " + num(v) + "\n";
}

void counter(std::string* out, const char* name, const char* help, double v) {
  *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " counter\n";
  *out += std::string(name) + " " + num(v) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

void Histogram::observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string* out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + num(sum_) + "\n";
  *out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}) {}

void Metrics::count_request(const std::string& endpoint, int http_status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, http_status}];
}

void Metrics::add_tokens(int64_t prompt, int64_t generated) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void Metrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}

void Metrics::observe_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

std::string Metrics::render(const EngineStats& engine, int64_t server_inflight, bool draining) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP dsv4_requests_total HTTP requests by endpoint and status code.\n# TYPE dsv4_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "dsv4_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  counter(&out, "dsv4_prompt_tokens_total", "Prompt tokens of admitted requests.", static_cast<double>(prompt_tokens_));
  counter(&out, "dsv4_generation_tokens_total", "Tokens generated and delivered to clients.",
          static_cast<double>(generated_tokens_));
  gauge(&out, "dsv4_queue_depth", "Requests waiting in the engine queue.", static_cast<double>(engine.queued));
  gauge(&out, "dsv4_running_sequences", "Sequences the engine is running.", static_cast<double>(engine.running));
  gauge(&out, "dsv4_server_inflight_requests", "HTTP generation requests admitted and not finished.",
        static_cast<double>(server_inflight));
  gauge(&out, "dsv4_server_draining", "1 while the server drains for shutdown.", draining ? 1.0 : 0.0);
  out += "# HELP dsv4_pool_blocks Engine state-pool blocks by kind and state.\n# TYPE dsv4_pool_blocks gauge\n";
  out += "dsv4_pool_blocks{kind=\"kv\",state=\"total\"} " + std::to_string(engine.pool_blocks_total) + "\n";
  out += "dsv4_pool_blocks{kind=\"kv\",state=\"free\"} " + std::to_string(engine.pool_blocks_free) + "\n";
  out += "dsv4_pool_blocks{kind=\"kv\",state=\"used\"} " +
         std::to_string(engine.pool_blocks_total - engine.pool_blocks_free) + "\n";
  counter(&out, "dsv4_engine_prompt_tokens_total", "Prompt tokens the engine processed.",
          static_cast<double>(engine.prompt_tokens_total));
  counter(&out, "dsv4_engine_generated_tokens_total", "Tokens the engine generated.",
          static_cast<double>(engine.generated_tokens_total));
  gauge(&out, "dsv4_spec_acceptance_ratio", "Speculative decoding: accepted / proposed draft tokens.",
        engine.spec_acceptance);
  if (!engine.spec_acceptance_by_position.empty()) {
    out += "# HELP dsv4_spec_acceptance_by_position_ratio Accepted / proposed at each draft position.\n"
           "# TYPE dsv4_spec_acceptance_by_position_ratio gauge\n";
    for (size_t i = 0; i < engine.spec_acceptance_by_position.size(); ++i) {
      out += "dsv4_spec_acceptance_by_position_ratio{position=\"" + std::to_string(i) + "\"} " +
             num(engine.spec_acceptance_by_position[i]) + "\n";
    }
  }
  counter(&out, "dsv4_engine_steps_total", "Engine steps run.", static_cast<double>(engine.steps));
  counter(&out, "dsv4_preemptions_total", "Sequences preempted (recomputed later) for lack of state.",
          static_cast<double>(engine.preemptions));
  counter(&out, "dsv4_prefix_cache_hits_total", "Requests that reused cached prefix state.",
          static_cast<double>(engine.prefix_cache_hits));
  counter(&out, "dsv4_prefix_cache_hit_tokens_total", "Prompt tokens served from cached prefix state.",
          static_cast<double>(engine.prefix_cache_hit_tokens));
  out += "# HELP dsv4_state_bytes Per-sequence model state (all kinds) in use and budgeted.\n"
         "# TYPE dsv4_state_bytes gauge\n";
  out += "dsv4_state_bytes{state=\"in_use\"} " + std::to_string(engine.state_bytes_in_use) + "\n";
  out += "dsv4_state_bytes{state=\"budget\"} " + std::to_string(engine.state_bytes_budget) + "\n";
  out += "# HELP dsv4_kv_page_bytes Paged compressed-KV stores (FP8 rows, FP4 indexer keys): bytes in use and allocated.\n"
         "# TYPE dsv4_kv_page_bytes gauge\n";
  out += "dsv4_kv_page_bytes{state=\"in_use\"} " + std::to_string(engine.kv_page_bytes_in_use) + "\n";
  out += "dsv4_kv_page_bytes{state=\"held\"} " + std::to_string(engine.kv_page_bytes_held) + "\n";
  out += "# HELP dsv4_state_page_bytes Paged window rows (FP8) and compressor partial blocks (fp32): bytes in use and allocated.\n"
         "# TYPE dsv4_state_page_bytes gauge\n";
  for (const auto& [kind, in_use, held] : {std::tuple{"window", engine.window_page_bytes_in_use, engine.window_page_bytes_held},
                                           std::tuple{"partial", engine.partial_page_bytes_in_use, engine.partial_page_bytes_held}}) {
    out += std::string("dsv4_state_page_bytes{kind=\"") + kind + "\",state=\"in_use\"} " + std::to_string(in_use) + "\n";
    out += std::string("dsv4_state_page_bytes{kind=\"") + kind + "\",state=\"held\"} " + std::to_string(held) + "\n";
  }
  out += "# HELP dsv4_scratch_bytes Step scratch (activation buffers) of all threads: bytes allocated.\n"
         "# TYPE dsv4_scratch_bytes gauge\n";
  out += "dsv4_scratch_bytes{state=\"held\"} " + std::to_string(engine.scratch_bytes_held) + "\n";
  out += "# HELP dsv4_time_to_first_token_seconds Time from admission to the first generated token.\n"
         "# TYPE dsv4_time_to_first_token_seconds histogram\n";
  ttft_.render("dsv4_time_to_first_token_seconds", &out);
  out += "# HELP dsv4_inter_token_latency_seconds Time between consecutive tokens of one sequence.\n"
         "# TYPE dsv4_inter_token_latency_seconds histogram\n";
  itl_.render("dsv4_inter_token_latency_seconds", &out);
  return out;
}

}  // namespace dsv4::server
