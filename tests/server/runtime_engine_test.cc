// tests/server: the server over the real runtime Engine (create_engine: scheduler, chunked prefill,
// block pool, sampler, MTP speculation) driven by the runtime's deterministic fake model. Checks the
// concurrency claim (32 simultaneous greedy requests equal their solo runs) and that disconnects return
// the real block pool to baseline.
#include <random>
#include <set>
#include <thread>

#include "concurrent_calls.h"
#include "runtime/engine_factory.h"
#include "runtime/testing/fake_detokenizer.h"
#include "runtime/testing/fake_model_runner.h"
#include "server_fixture.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kVocab = 64;

// Chat prompts mapped into the fake model's 64-token vocabulary (ids 2..63; 0/1 are BOS/EOS).
class SmallVocabCodec final : public ChatCodec {
 public:
  Result<std::vector<int32_t>> encode_chat(const ChatCompletionRequest& r) const override {
    return squeeze(inner_.encode_chat(r));
  }
  Result<std::vector<int32_t>> encode_text(std::string_view t) const override { return squeeze(inner_.encode_text(t)); }
  std::string token_text(int32_t id) const override { return detok_.piece(id); }
  std::unique_ptr<OutputParser> make_output_parser(bool thinking, bool parse_tools) const override {
    return inner_.make_output_parser(thinking, parse_tools);
  }

 private:
  static Result<std::vector<int32_t>> squeeze(Result<std::vector<int32_t>> ids) {
    if (!ids.is_ok()) return ids;
    for (int32_t& id : ids.value()) id = 2 + id % (kVocab - 2);
    return ids;
  }
  testing::SimpleCodec inner_;
  dsv4::testing::FakeDetokenizer detok_{kVocab};
};

// Paces the fake model (a sleep per forward) so a client can disconnect while its request still runs.
class PacedRunner final : public ModelRunner {
 public:
  PacedRunner(std::unique_ptr<ModelRunner> inner, std::chrono::microseconds per_forward)
      : inner_(std::move(inner)), per_forward_(per_forward) {}
  const RunnerInfo& info() const override { return inner_->info(); }
  Result<SeqSlot> create_sequence() override { return inner_->create_sequence(); }
  void free_sequence(SeqSlot seq) override { inner_->free_sequence(seq); }
  int32_t length(SeqSlot seq) const override { return inner_->length(seq); }
  Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) override {
    std::this_thread::sleep_for(per_forward_);
    return inner_->forward(batch, logits);
  }
  Status truncate(SeqSlot seq, int32_t new_len) override { return inner_->truncate(seq, new_len); }
  Status copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) override { return inner_->copy_prefix(dst, src, len); }
  Status draft(std::span<const RunnerToken> batch, std::vector<float>* logits) override {
    return inner_->draft(batch, logits);
  }

 private:
  std::unique_ptr<ModelRunner> inner_;
  std::chrono::microseconds per_forward_;
};

struct RuntimeServer {
  explicit RuntimeServer(int32_t speculative_k, int32_t max_running = 64,
                         std::chrono::microseconds per_forward = std::chrono::microseconds(0)) {
    dsv4::testing::FakeModelOptions mo;
    mo.vocab_size = kVocab;
    EngineOptions eo;
    eo.core.max_running = max_running;
    eo.core.max_batch_tokens = 64;  // small: prefill is chunked and interleaved with decodes
    eo.core.pool_blocks = 2048;
    eo.core.speculative_k = speculative_k;
    eo.model_name = "fake-runtime";
    std::unique_ptr<ModelRunner> runner = std::make_unique<dsv4::testing::FakeModelRunner>(mo);
    if (per_forward.count() > 0) runner = std::make_unique<PacedRunner>(std::move(runner), per_forward);
    auto created = create_engine(std::move(runner), eo,
                                 std::make_shared<dsv4::testing::FakeDetokenizer>(kVocab));
    if (!created.is_ok()) throw std::runtime_error(created.status().to_string());
    engine = std::move(created).value();
    ServerOptions so;
    so.port = 0;
    so.poll_interval = 5ms;
    server = std::make_unique<HttpServer>(*engine, codec, so);
    Status st = server->start_background();
    if (!st.is_ok()) throw std::runtime_error(st.to_string());
  }
  ~RuntimeServer() { server.reset(); }  // the server goes before the engine it uses

  httplib::Client client() const {
    httplib::Client c("127.0.0.1", server->port());
    c.set_keep_alive(false);
    c.set_read_timeout(60);
    return c;
  }

  std::unique_ptr<Engine> engine;
  SmallVocabCodec codec;
  std::unique_ptr<HttpServer> server;
};

std::vector<int> prompt_ids(int i) {
  std::mt19937 rng(1000 + i);
  std::vector<int> ids(5 + (i * 7) % 90);  // 5..94 tokens: several prefill chunks for the long ones
  for (int& id : ids) id = 2 + static_cast<int>(rng() % (kVocab - 2));
  return ids;
}

// The text and finish reason of a completion response, streamed or not.
std::string completion_answer(const httplib::Result& r, bool stream) {
  if (!r || r->status != 200) return "<error " + (r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error())) + ">";
  if (!stream) {
    Json j = Json::parse(r->body);
    return j["choices"][0]["text"].get<std::string>() + "|" + j["choices"][0]["finish_reason"].get<std::string>();
  }
  std::string text, finish;
  auto events = sse_payloads(r->body);
  for (size_t k = 0; k + 1 < events.size(); ++k) {
    Json c = Json::parse(events[k]);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  return text + "|" + finish;
}

void thirty_two_equal_solo(int32_t speculative_k) {
  RuntimeServer rs(speculative_k, /*max_running=*/16);
  const int kRequests = 32;
  auto body = [](int i) {
    return Json{{"model", "fake-runtime"}, {"prompt", prompt_ids(i)}, {"temperature", 0},
                {"max_tokens", 8 + i % 24}, {"stream", i % 2 == 1}}
        .dump();
  };
  std::vector<std::string> solo(kRequests), together(kRequests);
  for (int i = 0; i < kRequests; ++i) solo[i] = completion_answer(rs.client().Post("/v1/completions", body(i), "application/json"), i % 2 == 1);
  run_together(kRequests, [&](int i) {
    together[i] = completion_answer(rs.client().Post("/v1/completions", body(i), "application/json"), i % 2 == 1);
  });
  std::set<std::string> distinct;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_EQ(solo[i].rfind("<error", 0), std::string::npos) << solo[i];
    EXPECT_EQ(together[i], solo[i]) << "request " << i;
    distinct.insert(solo[i]);
  }
  EXPECT_GT(distinct.size(), 24u) << "different prompts must give different answers, or equality proves nothing";
}

TEST(RuntimeEngineServer, ThirtyTwoSimultaneousGreedyRequestsEqualSolo) { thirty_two_equal_solo(0); }

TEST(RuntimeEngineServer, ThirtyTwoSimultaneousGreedyRequestsEqualSoloWithSpeculation) {
  thirty_two_equal_solo(2);
}

TEST(RuntimeEngineServer, SpeculationShowsInMetrics) {
  RuntimeServer rs(2);
  auto r = rs.client().Post("/v1/completions",
                            Json{{"model", "fake-runtime"}, {"prompt", prompt_ids(3)}, {"max_tokens", 40}, {"temperature", 0},
                                 {"ignore_eos", true}}.dump(),
                            "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(Json::parse(r->body)["usage"]["completion_tokens"], 40);
  auto m = rs.client().Get("/metrics");
  ASSERT_TRUE(m);
  const std::string key = "\ndsv4_spec_acceptance_ratio ";
  const size_t at = m->body.find(key);
  ASSERT_NE(at, std::string::npos);
  const double ratio = std::stod(m->body.substr(at + key.size()));
  EXPECT_GT(ratio, 0.0);  // the fake draft head agrees with the main model most of the time
  EXPECT_LE(ratio, 1.0);
  EXPECT_NE(m->body.find("dsv4_spec_acceptance_by_position_ratio{position=\"1\"}"), std::string::npos);
}

TEST(RuntimeEngineServer, DisconnectsReturnTheBlockPoolToBaseline) {
  RuntimeServer rs(0, 64, std::chrono::microseconds(1000));  // >= 1 ms per engine step
  const EngineStats base = rs.engine->stats();
  ASSERT_GT(base.pool_blocks_total, 0);
  ASSERT_EQ(base.pool_blocks_free, base.pool_blocks_total);
  std::mt19937 rng(11);
  const int kDisconnects = 60;
  for (int i = 0; i < kDisconnects; ++i) {
    httplib::Client cli = rs.client();
    const std::string body = i % 2 ? Json{{"model", "fake-runtime"}, {"prompt", prompt_ids(i)}, {"max_tokens", 2000},
                                          {"ignore_eos", true}, {"stream", true}}.dump()
                                   : chat_body("fake-runtime", "hello " + std::to_string(i),
                                               {{"max_tokens", 2000}, {"ignore_eos", true}, {"stream", true}});
    post_and_hang_up(cli, i % 2 ? "/v1/completions" : "/v1/chat/completions", body, 1 + static_cast<int>(rng() % 40));
  }
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  EngineStats s = rs.engine->stats();
  while ((s.pool_blocks_free != base.pool_blocks_total || s.running != 0 || s.queued != 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
    s = rs.engine->stats();
  }
  EXPECT_EQ(s.pool_blocks_free, base.pool_blocks_total);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.queued, 0);
  // The requests were cut short, not run to their 2000 tokens: at >= 1 ms per step, finishing them
  // would have taken seconds per request, and they were abandoned after at most 40 chunks.
  EXPECT_LT(s.generated_tokens_total, kDisconnects * 2000 / 2);
}

}  // namespace
}  // namespace dsv4::server::test
