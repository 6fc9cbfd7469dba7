// tests/server: reliability.md §B3/§B4/§B6 and the concurrency check — admission limits with 429/503 +
// Retry-After, client disconnects cancelling engine work and returning the pool to baseline, 32
// simultaneous requests equal to the same requests alone, graceful shutdown.
#include <atomic>
#include <random>
#include <thread>

#include "concurrent_calls.h"
#include "server_fixture.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

// Waits (bounded) until `pred` holds; returns whether it did.
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

std::string long_text(int words) {
  std::string t = "</think>";
  for (int i = 0; i < words; ++i) t += "word" + std::to_string(i) + " ";
  return t;
}

TEST(ServerLoad, QueueOverflowGives429WithRetryAfter) {
  ServerOptions so;
  so.max_concurrency = 2;
  so.max_queue = 2;
  TestServer ts({}, so);
  ts.engine.set_paused(true);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back([&, i] {
      auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "q" + std::to_string(i), {{"max_tokens", 4}}));
      if (r && r->status == 200) ++ok;
    });
  }
  ASSERT_TRUE(wait_until([&] { return ts.server->inflight_sequences() == 4; }));
  for (bool stream : {false, true}) {
    auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "one too many", {{"stream", stream}}));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 429) << r->body;
    EXPECT_EQ(r->get_header_value("Retry-After"), "1");
    EXPECT_EQ(Json::parse(r->body)["error"]["code"], "queue_full");
  }
  // n counts as n sequences: a request for 2 choices does not fit either.
  EXPECT_EQ(ts.post("/v1/chat/completions", chat_body(ts.model, "x", {{"n", 2}}))->status, 429);
  EXPECT_EQ(ts.get("/health")->status, 200);  // overload never blocks the health check
  ts.engine.set_paused(false);
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_TRUE(wait_until([&] { return ts.server->inflight_sequences() == 0; }));  // released after the write
  EXPECT_EQ(ts.post("/v1/chat/completions", chat_body(ts.model, "again"))->status, 200);
}

TEST(ServerLoad, EngineQueueFullGives503WithRetryAfter) {
  testing::FakeEngineOptions eo;
  eo.max_queued = 1;
  TestServer ts(eo);
  ts.engine.set_paused(true);
  std::thread first([&] { ts.post("/v1/chat/completions", chat_body(ts.model, "first", {{"max_tokens", 2}})); });
  ASSERT_TRUE(wait_until([&] { return ts.engine.stats().queued == 1; }));
  auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "second"));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(Json::parse(r->body)["error"]["code"], "engine.queue_full");
  ts.engine.set_paused(false);
  first.join();
  EXPECT_TRUE(wait_until([&] { return ts.server->inflight_sequences() == 0; }));  // released after the write
}

TEST(ServerLoad, DisconnectMidStreamCancelsAndFreesThePool) {
  testing::FakeEngineOptions eo;
  eo.step_time = 1ms;
  TestServer ts(eo);
  ts.engine.set_script([](const GenerationRequest&) { return long_text(2000); });
  const int64_t total = ts.metric("dsv4_pool_blocks{kind=\"kv\",state=\"total\"}");
  ASSERT_GT(total, 0);
  ASSERT_EQ(ts.metric("dsv4_pool_blocks{kind=\"kv\",state=\"free\"}"), total);
  std::mt19937 rng(7);
  const int kDisconnects = 40;
  for (int i = 0; i < kDisconnects; ++i) {
    // Mid-decode at a random point; every fifth while the request is still queued.
    const bool queued = i % 5 == 0;
    if (queued) ts.engine.set_paused(true);
    httplib::Client cli = ts.client();
    post_and_hang_up(cli, "/v1/chat/completions", chat_body(ts.model, "p" + std::to_string(i), {{"stream", true}}),
                     queued ? 1 : 2 + static_cast<int>(rng() % 30));
    if (queued) {
      ASSERT_TRUE(wait_until([&] { return ts.engine.cancels_applied() == i + 1; })) << "queued request " << i;
      ts.engine.set_paused(false);
    }
  }
  ASSERT_TRUE(wait_until([&] { return ts.engine.cancels_applied() == kDisconnects; }))
      << "cancels observed: " << ts.engine.cancels_applied();
  ASSERT_TRUE(wait_until([&] { return ts.metric("dsv4_pool_blocks{kind=\"kv\",state=\"free\"}") == total; }));
  EXPECT_EQ(ts.metric("dsv4_running_sequences"), 0);
  EXPECT_EQ(ts.metric("dsv4_queue_depth"), 0);
  EXPECT_TRUE(wait_until([&] { return ts.server->inflight_sequences() == 0; }));
  EXPECT_EQ(ts.get("/health")->status, 200);
}

TEST(ServerLoad, DisconnectWhileWaitingForNonStreamingAnswerCancels) {
  TestServer ts;
  ts.engine.set_paused(true);
  {
    httplib::Client cli = ts.client();
    cli.set_read_timeout(0, 200000);  // the client gives up after 200 ms and closes the connection
    auto r = cli.Post("/v1/chat/completions", chat_body(ts.model, "slow"), "application/json");
    EXPECT_FALSE(r);
  }
  ASSERT_TRUE(wait_until([&] { return ts.engine.cancels_applied() == 1; }));
  EXPECT_TRUE(wait_until([&] { return ts.server->inflight_sequences() == 0; }));
  EXPECT_EQ(ts.engine.stats().queued, 0);
}

TEST(ServerLoad, ThirtyTwoSimultaneousGreedyRequestsEqualTheirSoloRuns) {
  testing::FakeEngineOptions eo;
  eo.max_running = 8;  // forces queueing and interleaving
  TestServer ts(eo);
  const int kRequests = 32;
  auto body = [&](int i) {
    return chat_body(ts.model, "prompt number " + std::to_string(i),
                     {{"temperature", 0}, {"max_tokens", 20 + i}, {"stream", i % 2 == 1}});
  };
  auto answer = [&](const httplib::Result& r, int i) -> std::string {
    if (!r || r->status != 200) return "<error>";
    if (i % 2 == 0) return Json::parse(r->body)["choices"][0]["message"].dump();
    std::string content, reasoning, finish;
    auto events = sse_payloads(r->body);
    for (size_t k = 0; k + 1 < events.size(); ++k) {
      Json c = Json::parse(events[k]);
      const Json& d = c["choices"][0]["delta"];
      if (d.contains("content")) content += d["content"].get<std::string>();
      if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
      if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    return reasoning + "|" + content + "|" + finish;
  };
  std::vector<std::string> solo(kRequests), together(kRequests);
  for (int i = 0; i < kRequests; ++i) solo[i] = answer(ts.post("/v1/chat/completions", body(i)), i);
  run_together(kRequests, [&](int i) { together[i] = answer(ts.post("/v1/chat/completions", body(i)), i); });
  std::set<std::string> distinct;
  for (int i = 0; i < kRequests; ++i) {
    EXPECT_NE(solo[i], "<error>");
    EXPECT_EQ(together[i], solo[i]) << "request " << i;
    distinct.insert(solo[i]);
  }
  EXPECT_GT(distinct.size(), 16u) << "the prompts must give different answers, or equality proves nothing";
}

TEST(ServerLoad, ShutdownDrainsThenEndsStreamsWithATerminalError) {
  testing::FakeEngineOptions eo;
  eo.step_time = 1ms;
  TestServer ts(eo);
  ts.engine.set_script([](const GenerationRequest& r) {
    return r.stop.max_tokens <= 5 ? std::string("</think>short") : long_text(20000);
  });
  std::string long_body, short_body;
  // Both requests are admitted and queued before the drain begins; the engine runs once it has begun.
  ts.engine.set_paused(true);
  std::thread long_stream([&] {
    auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "long", {{"stream", true}}));
    if (r) long_body = r->body;
  });
  std::thread short_req([&] {
    auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "short", {{"max_tokens", 5}, {"stream", true}}));
    if (r) short_body = r->body;
  });
  ASSERT_TRUE(wait_until([&] { return ts.engine.stats().queued == 2; }));
  std::thread stopper([&] { ts.server->shutdown(1500ms); });
  ASSERT_TRUE(wait_until([&] { return ts.server->draining(); }));
  auto refused = ts.post("/v1/chat/completions", chat_body(ts.model, "late"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "1");
  auto health = ts.get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 503);
  ts.engine.set_paused(false);
  short_req.join();
  long_stream.join();
  stopper.join();
  // The short request finished normally during the drain.
  auto short_events = sse_payloads(short_body);
  ASSERT_GE(short_events.size(), 2u);
  EXPECT_EQ(short_events.back(), "[DONE]");
  EXPECT_NE(short_body.find("\"finish_reason\":\"stop\""), std::string::npos);
  // The long one was ended by the drain deadline: an error event, then [DONE].
  auto events = sse_payloads(long_body);
  ASSERT_GE(events.size(), 3u) << long_body.substr(0, 500);
  EXPECT_EQ(events.back(), "[DONE]");
  Json err = Json::parse(events[events.size() - 2]);
  ASSERT_TRUE(err.contains("error")) << events[events.size() - 2];
  EXPECT_EQ(err["error"]["code"], "shutting_down");
  EXPECT_TRUE(wait_until([&] { return ts.engine.stats().running == 0; }));
  EXPECT_EQ(ts.engine.stats().pool_blocks_free, ts.engine.stats().pool_blocks_total);
}

}  // namespace
}  // namespace dsv4::server::test
