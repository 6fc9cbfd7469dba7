// server: Prometheus counters and histograms for /metrics. Thread-safe; HTTP worker threads record, the
// /metrics handler renders together with a snapshot of the engine's stats.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends the _bucket/_sum/_count lines for `name`.
  void render(const std::string& name, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // one per bound, non-cumulative; the +Inf bucket is count_
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  Metrics();
  void count_request(const std::string& endpoint, int http_status);
  void add_tokens(int64_t prompt, int64_t generated);
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  // The Prometheus text exposition, with gauges from the engine and the server's own admission state.
  std::string render(const EngineStats& engine, int64_t server_inflight, bool draining) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;  // (endpoint, status) → count
  int64_t prompt_tokens_ = 0;
  int64_t generated_tokens_ = 0;
  Histogram ttft_;
  Histogram itl_;
};

}  // namespace dsv4::server
