// tests/server: `dsv4 serve` end to end on a real model. The binary, started without --model, generates
// the embedded tiny model (random weights, the real tokenizer) into a temporary cache and serves it on
// 127.0.0.1; every request goes over HTTP through the runtime engine and the model's forward pass.
// Oracles: `dsv4 generate` (the forward pass without the runtime) for greedy output, each request's
// solo run for the concurrent batch, /metrics pool gauges for disconnects, the official openai client.
#include <httplib.h>

#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "concurrent_calls.h"
#include "openai_client.h"
#include "serve_process.h"
#include "server_fixture.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kKey = "sk-real-model";
constexpr const char* kModel = "tiny-seed1";  // the cache directory's name

class RealModelServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cache_ = new dsv4::test::TempDir();
    proc_ = new ServeProcess({"serve", "--port", "0", "--max-concurrency", "32", "--api-key", kKey},
                             {"DSV4_CACHE_DIR=" + cache_->path().string()});
    proc_->read_until(" (model", 180s);
    port_ = proc_->listening_port();
  }
  static void TearDownTestSuite() {
    proc_->terminate(30s);
    delete proc_;
    delete cache_;
  }
  void SetUp() override { ASSERT_GT(port_, 0) << "the server did not start:\n" << proc_->output; }

  static std::filesystem::path model_dir() { return cache_->path() / kModel; }

  static httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_keep_alive(false);
    c.set_read_timeout(120);
    c.set_bearer_token_auth(kKey);
    return c;
  }
  // (status, parsed body); the body must be JSON whatever the status.
  static std::pair<int, Json> post(const std::string& path, const Json& body) {
    auto r = client().Post(path.c_str(), body.dump(), "application/json");
    if (!r) return {-1, Json()};
    return {r->status, Json::parse(r->body)};
  }
  // The raw SSE body of a streaming request, split into its data payloads.
  static std::vector<std::string> post_stream(const std::string& path, const Json& body) {
    auto r = client().Post(path.c_str(), body.dump(), "application/json");
    std::vector<std::string> out;
    if (!r) return out;
    EXPECT_EQ(r->status, 200) << r->body;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("data: ", 0) == 0) out.push_back(line.substr(6));
    return out;
  }
  static int64_t metric(const std::string& name) {
    auto r = client().Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
    return -1;
  }
  static int64_t pool_used() { return metric("dsv4_pool_blocks{kind=\"kv\",state=\"used\"}"); }
  // Waits (bounded) until no sequence runs and the pool is back to `baseline` used blocks.
  static bool back_to_baseline(int64_t baseline) {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pool_used() == baseline && metric("dsv4_running_sequences") == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  static dsv4::test::TempDir* cache_;
  static ServeProcess* proc_;
  static int port_;
};

dsv4::test::TempDir* RealModelServe::cache_ = nullptr;
ServeProcess* RealModelServe::proc_ = nullptr;
int RealModelServe::port_ = -1;

Json completion(const Json& prompt, int max_tokens, bool stream = false) {
  return Json{{"model", kModel}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}, {"stream", stream}};
}

Json chat(const std::string& user, int max_tokens, bool thinking, bool stream = false) {
  Json j{{"model", kModel},
         {"messages", Json::array({Json{{"role", "user"}, {"content", user}}})},
         {"max_tokens", max_tokens},
         {"temperature", 0},
         {"chat_template_kwargs", Json{{"thinking", thinking}}},
         {"stream", stream}};
  if (stream) j["stream_options"] = Json{{"include_usage", true}};
  return j;
}

TEST_F(RealModelServe, EmbeddedDefaultModelIsGeneratedLoadedAndServed) {
  EXPECT_NE(proc_->output.find("generating the embedded tiny model"), std::string::npos) << proc_->output;
  EXPECT_NE(proc_->output.find("100%"), std::string::npos) << "no loading progress: " << proc_->output;
  EXPECT_TRUE(std::filesystem::exists(model_dir() / "config.json"));
  EXPECT_TRUE(std::filesystem::exists(model_dir() / "tokenizer.json"));
  auto r = client().Get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const Json j = Json::parse(r->body);
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], kModel);
  EXPECT_EQ(j["data"][0]["max_model_len"], 1024);  // the tiny preset's max_position_embeddings
  httplib::Client anon("127.0.0.1", port_);
  EXPECT_EQ(anon.Get("/health")->status, 200);
  EXPECT_EQ(anon.Get("/v1/models")->status, 401);
}

// The engine's greedy output (scheduler, pool, sampler, detokenizer) is the forward pass's: `dsv4
// generate` runs the model directly, one token at a time, and its ids decode to the served text.
TEST_F(RealModelServe, GreedyCompletionEqualsTheDirectForwardPass) {
  const std::vector<int32_t> prompt = {0, 4541, 2813, 671, 30500};
  std::string ids;
  for (int32_t id : prompt) ids += (ids.empty() ? "" : " ") + std::to_string(id);
  auto gen = dsv4::test::run_command(dsv4::test::cli_path().string() + " generate --model " + model_dir().string() +
                                     " --prompt-ids '" + ids + "' -n 8");
  ASSERT_EQ(gen.exit_code, 0) << gen.output;
  std::vector<int32_t> expect_ids;
  std::istringstream in(gen.output);
  for (int32_t id; in >> id;) expect_ids.push_back(id);
  ASSERT_FALSE(expect_ids.empty()) << gen.output;
  const bool hit_eos = expect_ids.size() < 8;
  if (hit_eos) expect_ids.pop_back();  // generate prints the EOS id; the API text does not hold it
  auto tok = Tokenizer::load(model_dir() / "tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const std::string expect_text = tok->decode(expect_ids);

  auto [status, j] = post("/v1/completions", completion(prompt, 8));
  ASSERT_EQ(status, 200) << j.dump();
  EXPECT_EQ(j["choices"][0]["text"], expect_text);
  EXPECT_EQ(j["choices"][0]["finish_reason"], hit_eos ? "stop" : "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt.size());
  EXPECT_EQ(j["usage"]["completion_tokens"], hit_eos ? expect_ids.size() + 1 : 8u);

  // Streamed: the text deltas add up to the same text, then [DONE].
  auto events = post_stream("/v1/completions", completion(prompt, 8, true));
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += Json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, expect_text);
}

TEST_F(RealModelServe, ChatStreamingEqualsNonStreaming) {
  for (bool thinking : {true, false}) {
    auto [status, r] = post("/v1/chat/completions", chat("Hello there", 6, thinking));
    ASSERT_EQ(status, 200) << r.dump();
    const Json& msg = r["choices"][0]["message"];
    EXPECT_EQ(msg["role"], "assistant");
    EXPECT_EQ(r["usage"]["completion_tokens"].get<int>() <= 6, true);
    EXPECT_EQ(r["usage"]["total_tokens"], r["usage"]["prompt_tokens"].get<int>() + r["usage"]["completion_tokens"].get<int>());
    if (!thinking) {
      EXPECT_FALSE(msg.contains("reasoning_content")) << r.dump();
    }

    auto events = post_stream("/v1/chat/completions", chat("Hello there", 6, thinking, true));
    ASSERT_GE(events.size(), 3u);
    EXPECT_EQ(events.back(), "[DONE]");
    std::string content, reasoning, finish;
    Json usage;
    for (size_t i = 0; i + 1 < events.size(); ++i) {
      const Json c = Json::parse(events[i]);
      EXPECT_EQ(c["object"], "chat.completion.chunk");
      if (c.contains("usage") && !c["usage"].is_null()) usage = c["usage"];
      if (c["choices"].empty()) continue;
      const Json& d = c["choices"][0]["delta"];
      if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
      if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
        reasoning += d["reasoning_content"].get<std::string>();
      if (c["choices"][0]["finish_reason"].is_string()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(content, msg.value("content", Json("")).is_string() ? msg.value("content", "") : "");
    EXPECT_EQ(reasoning, msg.value("reasoning_content", ""));
    EXPECT_EQ(finish, r["choices"][0]["finish_reason"]);
    EXPECT_EQ(usage, r["usage"]);
  }
}

// The tool round trip itself (offer, call, result, answer) runs in OfficialOpenAiClient: tool prompts
// are a few hundred tokens, which the scalar reference forward prefills slowly, so it is sent once.
// Here: a named tool_choice for a tool that was not offered is the client's error, found before the
// engine runs.
TEST_F(RealModelServe, ToolChoiceOfAnUnofferedToolIsAClientError) {
  Json req = chat("weather in Paris?", 2, false);
  req["tools"] = Json::parse(R"([{"type":"function","function":{"name":"get_weather","description":"Get weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
  req["tool_choice"] = Json{{"type", "function"}, {"function", {{"name", "nope"}}}};
  const int64_t prompt_tokens_before = metric("dsv4_engine_prompt_tokens_total");
  auto [s1, e1] = post("/v1/chat/completions", req);
  EXPECT_EQ(s1, 400) << e1.dump();
  EXPECT_EQ(e1["error"]["type"], "invalid_request_error") << e1.dump();
  EXPECT_EQ(metric("dsv4_engine_prompt_tokens_total"), prompt_tokens_before);
}

TEST_F(RealModelServe, ContextOverflowReportsBothCounts) {
  auto [s0, ok] = post("/v1/chat/completions", chat("Hello there", 1, false));
  ASSERT_EQ(s0, 200) << ok.dump();
  const int prompt_tokens = ok["usage"]["prompt_tokens"];
  auto [s1, err] = post("/v1/chat/completions", chat("Hello there", 1020, false));
  EXPECT_EQ(s1, 400) << err.dump();
  EXPECT_EQ(err["error"]["code"], "context_length_exceeded");
  const std::string msg = err["error"]["message"];
  EXPECT_NE(msg.find("1024"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(prompt_tokens) + " in the prompt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1020 for the completion"), std::string::npos) << msg;
  // A 1000-token prompt of ids: over with 30 more, fine with 8.
  std::vector<int32_t> long_prompt(1000, 4541);
  auto [s2, e2] = post("/v1/completions", completion(long_prompt, 30));
  EXPECT_EQ(s2, 400) << e2.dump();
  EXPECT_NE(e2["error"]["message"].get<std::string>().find("1000 in the prompt"), std::string::npos) << e2.dump();
  auto [s3, e3] = post("/v1/completions", completion(std::vector<int32_t>{0, 200000}, 4));
  EXPECT_EQ(s3, 400) << e3.dump();  // an id outside the model's vocabulary
  auto [s4, e4] = post("/v1/completions", Json{{"model", "other"}, {"prompt", "x"}});
  EXPECT_EQ(s4, 404) << e4.dump();
}

// 32 greedy requests at once through the real engine (batched forwards, chunked prefill), 8 copies
// each of 4 different prompts: every one returns exactly what its prompt returns when sent alone.
TEST_F(RealModelServe, ThirtyTwoSimultaneousGreedyRequestsEqualTheirSoloRuns) {
  constexpr int kN = 32, kPrompts = 4;
  auto request = [](int i) {
    const int p = i % kPrompts;
    return completion(std::vector<int32_t>{0, 1000 + 37 * p, 3000 + p}, 4);
  };
  std::vector<Json> solo(kPrompts);
  for (int p = 0; p < kPrompts; ++p) {
    auto [s, j] = post("/v1/completions", request(p));
    ASSERT_EQ(s, 200) << j.dump();
    solo[p] = j;
  }
  const int64_t steps_before = metric("dsv4_engine_steps_total");
  std::vector<Json> together(kN);
  std::vector<int> status(kN, 0);
  run_together(kN, [&](int i) { std::tie(status[i], together[i]) = post("/v1/completions", request(i)); });
  std::set<std::string> distinct;
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(status[i], 200) << together[i].dump();
    EXPECT_EQ(together[i]["choices"][0]["text"], solo[i % kPrompts]["choices"][0]["text"]) << "request " << i;
    EXPECT_EQ(together[i]["usage"], solo[i % kPrompts]["usage"]) << "request " << i;
  }
  for (const Json& j : solo) distinct.insert(j["choices"][0]["text"].get<std::string>());
  EXPECT_GT(distinct.size(), 1u) << "the prompts should lead to different outputs";
  std::printf("32 concurrent requests took %lld engine steps\n",
              static_cast<long long>(metric("dsv4_engine_steps_total") - steps_before));
}

// A client that hangs up mid-stream: the engine request is cancelled (it stops generating) and its
// state returns to the pool.
TEST_F(RealModelServe, DisconnectMidStreamReturnsThePoolToBaseline) {
  const int64_t baseline = pool_used();
  ASSERT_GE(baseline, 0);
  for (int stop_after : {1, 3, 9}) {
    const int64_t generated_before = metric("dsv4_engine_generated_tokens_total");
    auto c = client();
    EXPECT_FALSE(post_and_hang_up(c, "/v1/completions", completion(std::vector<int32_t>{0, 500, 600}, 1000, true).dump(),
                                  stop_after, {{"Authorization", std::string("Bearer ") + kKey}}))
        << "the client should have aborted";
    ASSERT_TRUE(back_to_baseline(baseline)) << "pool used " << pool_used() << " != " << baseline;
    // Cancelled, not run to its 1000 tokens.
    EXPECT_LT(metric("dsv4_engine_generated_tokens_total") - generated_before, 1000) << "after " << stop_after;
  }
  // The window and partial-block pages the requests used are reported (allocated memory stays for reuse).
  for (const char* kind : {"window", "partial"}) {
    const std::string k = std::string("dsv4_state_page_bytes{kind=\"") + kind + "\",state=";
    EXPECT_GT(metric(k + "\"held\"}"), 0) << kind;
    EXPECT_GE(metric(k + "\"held\"}"), metric(k + "\"in_use\"}")) << kind;
    EXPECT_GE(metric(k + "\"in_use\"}"), 0) << kind;
  }
}

TEST_F(RealModelServe, OfficialOpenAiClient) {
  const int64_t baseline = pool_used();
  ASSERT_NO_FATAL_FAILURE(
      run_openai_client("openai_real_model_e2e.js", port_, std::string(kModel) + " " + kKey, 600s));
  EXPECT_TRUE(back_to_baseline(baseline)) << "the aborted stream's state was not freed";
}

}  // namespace
}  // namespace dsv4::server::test
