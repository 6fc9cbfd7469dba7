// tests/server: `dsv4 serve --state-budget-mib N --prefix-cache N` end to end on the embedded tiny model.
// Two servers share one generated model: one bound to a 1 MiB state budget with a prefix cache, one
// unbudgeted without. Oracles: the unbudgeted server's greedy tokens (a budget may delay a request, never
// change it), the budget itself against the page bytes /metrics reports (sampled while requests run), and
// the prefix-cache counters for a request that extends an earlier prompt.
#include <httplib.h>

#include <atomic>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "concurrent_calls.h"
#include "serve_process.h"
#include "test_util.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kModel = "tiny-seed1";  // the cache directory's name
constexpr int64_t kBudgetMib = 1;
constexpr int64_t kBudgetBytes = kBudgetMib << 20;

using Metrics = std::map<std::string, int64_t>;

Metrics metrics_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(false);
  Metrics out;
  auto r = c.Get("/metrics");
  if (!r || r->status != 200) return out;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = static_cast<int64_t>(std::stod(line.substr(sp + 1)));
  }
  return out;
}

// Page bytes of every kind of state: compressed rows and keys, window rows, partial blocks.
int64_t page_bytes(const Metrics& m, const std::string& state) {
  return m.at("dsv4_kv_page_bytes{state=\"" + state + "\"}") +
         m.at("dsv4_state_page_bytes{kind=\"window\",state=\"" + state + "\"}") +
         m.at("dsv4_state_page_bytes{kind=\"partial\",state=\"" + state + "\"}");
}

Json completion(const std::vector<int32_t>& prompt, int max_tokens) {
  return Json{{"model", kModel}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

std::pair<int, Json> post(int port, const Json& body) {
  httplib::Client c("127.0.0.1", port);
  c.set_keep_alive(false);
  c.set_read_timeout(120);
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  if (!r) return {-1, Json()};
  return {r->status, Json::parse(r->body)};
}

// A prompt of `n` tokens, different for each `seed`.
std::vector<int32_t> prompt_of(int n, int seed) {
  std::vector<int32_t> p = {0};
  for (int i = 1; i < n; ++i) p.push_back(1000 + (seed * 7919 + i * 131) % 20000);
  return p;
}

class ServeBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = new dsv4::test::TempDir();
    const std::vector<std::string> env = {"DSV4_CACHE_DIR=" + cache_->path().string()};
    budgeted_ = new ServeProcess({"serve", "--port", "0", "--max-concurrency", "8", "--state-budget-mib",
                                  std::to_string(kBudgetMib), "--prefix-cache", "4"},
                                 env);
    budgeted_->read_until(" (model", 180s);  // generates the model into the cache
    free_ = new ServeProcess({"serve", "--port", "0", "--max-concurrency", "8"}, env);
    free_->read_until(" (model", 180s);
  }
  static void TearDownTestSuite() {
    for (ServeProcess* p : {budgeted_, free_}) {
      p->terminate(30s);
      delete p;
    }
    delete cache_;
  }
  void SetUp() override {
    ASSERT_GT(budgeted_->listening_port(), 0) << "the budgeted server did not start:\n" << budgeted_->output;
    ASSERT_GT(free_->listening_port(), 0) << "the unbudgeted server did not start:\n" << free_->output;
  }
  static int budgeted_port() { return budgeted_->listening_port(); }
  static int free_port() { return free_->listening_port(); }

  static dsv4::test::TempDir* cache_;
  static ServeProcess* budgeted_;
  static ServeProcess* free_;
};

dsv4::test::TempDir* ServeBudget::cache_ = nullptr;
ServeProcess* ServeBudget::budgeted_ = nullptr;
ServeProcess* ServeBudget::free_ = nullptr;

// Eight simultaneous requests of mixed prompt lengths under a 1 MiB budget (less than they need at
// once: the budgeted engine makes some wait): each returns the unbudgeted server's greedy tokens, and
// no sample of /metrics, taken while they run, shows more page bytes in use or held than the budget.
TEST_F(ServeBudget, SmallBudgetCompletesSimultaneousRequestsLikeAnUnbudgetedServer) {
  constexpr int kN = 8;
  std::vector<Json> requests;
  for (int i = 0; i < kN; ++i) requests.push_back(completion(prompt_of(5 + 9 * i, i), 6));
  std::vector<Json> expected(kN);
  for (int i = 0; i < kN; ++i) {
    auto [s, j] = post(free_port(), requests[i]);
    ASSERT_EQ(s, 200) << j.dump();
    expected[i] = j;
  }
  const Metrics before = metrics_of(budgeted_port());
  ASSERT_EQ(before.count("dsv4_kv_page_bytes{state=\"held\"}"), 1u) << "no page metrics";

  std::atomic<bool> done{false};
  int64_t peak_in_use = 0, peak_held = 0, peak_running = 0, samples = 0;
  std::thread sampler([&] {
    while (!done.load()) {
      const Metrics m = metrics_of(budgeted_port());
      if (!m.empty()) {
        ++samples;
        peak_in_use = std::max(peak_in_use, page_bytes(m, "in_use"));
        peak_held = std::max(peak_held, page_bytes(m, "held"));
        peak_running = std::max(peak_running, m.at("dsv4_running_sequences"));
      }
      std::this_thread::sleep_for(2ms);
    }
  });
  std::vector<Json> got(kN);
  std::vector<int> status(kN, 0);
  run_together(kN, [&](int i) { std::tie(status[i], got[i]) = post(budgeted_port(), requests[i]); });
  done = true;
  sampler.join();
  const Metrics after = metrics_of(budgeted_port());

  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(status[i], 200) << got[i].dump();
    EXPECT_EQ(got[i]["choices"][0]["text"], expected[i]["choices"][0]["text"]) << "request " << i;
    EXPECT_EQ(got[i]["usage"], expected[i]["usage"]) << "request " << i;
  }
  peak_in_use = std::max(peak_in_use, page_bytes(after, "in_use"));
  peak_held = std::max(peak_held, page_bytes(after, "held"));
  std::printf("budget %lld B: %lld samples, peak page bytes in use %lld, held %lld; peak running %lld of %d\n",
              static_cast<long long>(kBudgetBytes), static_cast<long long>(samples),
              static_cast<long long>(peak_in_use), static_cast<long long>(peak_held),
              static_cast<long long>(peak_running), kN);
  EXPECT_GT(peak_in_use, 0);
  EXPECT_LE(peak_in_use, kBudgetBytes);
  EXPECT_LE(peak_held, kBudgetBytes) << "pages freed by one kind of state must not stay held past the budget";
  EXPECT_LE(after.at("dsv4_state_bytes{state=\"budget\"}"), kBudgetBytes);
  // The step scratch is reported (the forwards above needed activation buffers); it is not state.
  EXPECT_GT(after.at("dsv4_scratch_bytes{state=\"held\"}"), 0);
}

// A request that extends an earlier prompt reuses its cached state (the counters move by one hit
// covering part of the shared prefix) and still returns the unbudgeted server's tokens.
// Its own budgeted server: a cold prefix cache, whatever the other tests left cached.
TEST_F(ServeBudget, SharedPrefixRequestIsAPrefixCacheHit) {
  ServeProcess proc({"serve", "--port", "0", "--max-concurrency", "8", "--state-budget-mib", std::to_string(kBudgetMib),
                     "--prefix-cache", "4"},
                    {"DSV4_CACHE_DIR=" + cache_->path().string()});
  ASSERT_TRUE(proc.read_until(" (model", 180s)) << proc.output;
  const int port = proc.listening_port();
  ASSERT_GT(port, 0) << proc.output;
  const std::vector<int32_t> first = prompt_of(40, 101);
  std::vector<int32_t> second = first;
  for (int i = 0; i < 12; ++i) second.push_back(2000 + 17 * i);
  auto [s1, j1] = post(port, completion(first, 4));
  ASSERT_EQ(s1, 200) << j1.dump();
  const Metrics before = metrics_of(port);
  auto [s2, j2] = post(port, completion(second, 4));
  ASSERT_EQ(s2, 200) << j2.dump();
  const Metrics after = metrics_of(port);
  EXPECT_EQ(after.at("dsv4_prefix_cache_hits_total") - before.at("dsv4_prefix_cache_hits_total"), 1);
  const int64_t hit_tokens = after.at("dsv4_prefix_cache_hit_tokens_total") - before.at("dsv4_prefix_cache_hit_tokens_total");
  EXPECT_GT(hit_tokens, 0);
  EXPECT_LE(hit_tokens, static_cast<int64_t>(first.size()));
  auto [s3, j3] = post(free_port(), completion(second, 4));
  ASSERT_EQ(s3, 200) << j3.dump();
  EXPECT_EQ(j2["choices"][0]["text"], j3["choices"][0]["text"]);
  EXPECT_EQ(proc.terminate(30s), 0) << proc.output;
  // The unbudgeted server runs without a prefix cache: no hits there (the counter is the oracle's control).
  EXPECT_EQ(metrics_of(free_port()).at("dsv4_prefix_cache_hits_total"), 0);
}

// The same after a busy period: the cached sequences of eight earlier requests fill the 1 MiB budget, and
// the copy a hit needs (it replays tokens) must make room by evicting them rather than miss.
TEST_F(ServeBudget, SharedPrefixHitsAfterCachedSequencesFillTheBudget) {
  run_together(8, [](int i) { EXPECT_EQ(post(budgeted_port(), completion(prompt_of(5 + 9 * i, i), 6)).first, 200); });
  const std::vector<int32_t> first = prompt_of(40, 101);
  std::vector<int32_t> second = first;
  for (int i = 0; i < 12; ++i) second.push_back(2000 + 17 * i);
  ASSERT_EQ(post(budgeted_port(), completion(first, 4)).first, 200);
  const Metrics before = metrics_of(budgeted_port());
  auto [s2, j2] = post(budgeted_port(), completion(second, 4));
  ASSERT_EQ(s2, 200) << j2.dump();
  const Metrics after = metrics_of(budgeted_port());
  EXPECT_EQ(after.at("dsv4_prefix_cache_hits_total") - before.at("dsv4_prefix_cache_hits_total"), 1);
  EXPECT_EQ(after.at("dsv4_prefix_cache_hit_tokens_total") - before.at("dsv4_prefix_cache_hit_tokens_total"),
            static_cast<int64_t>(first.size()));
  auto [s3, j3] = post(free_port(), completion(second, 4));
  ASSERT_EQ(s3, 200) << j3.dump();
  EXPECT_EQ(j2["choices"][0]["text"], j3["choices"][0]["text"]);
}

}  // namespace
}  // namespace dsv4::server::test
