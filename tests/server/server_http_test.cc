// tests/server: endpoint behaviour over real HTTP against the FakeEngine — response shapes, streaming
// framing, usage and reasoning counts, stop/max_tokens/n/logprobs, context and model checks, auth, CORS.
#include <set>
#include <thread>

#include "server_fixture.h"

namespace dsv4::server::test {
namespace {

using testing::FakeEngine;

Json parse(const httplib::Result& r) { return Json::parse(r->body); }

// /metrics once it contains every one of `needles`: the request counter is bumped by the access logger,
// which runs after the response has been written, so a client can see its answer a moment earlier.
std::string metrics_with(const TestServer& ts, const std::vector<std::string>& needles) {
  std::string body;
  for (int attempt = 0; attempt < 2000; ++attempt) {
    auto r = ts.get("/metrics");
    body = r ? r->body : "";
    bool all = true;
    for (const auto& n : needles) all = all && body.find(n) != std::string::npos;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return body;
}

void expect_error_shape(const httplib::Result& r, int status, const std::string& code) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status) << r->body;
  Json j = Json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r->body;
  ASSERT_TRUE(j.contains("error")) << r->body;
  const Json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string());
  EXPECT_TRUE(e["type"].is_string());
  EXPECT_TRUE(e.contains("param"));
  EXPECT_TRUE(e.contains("code"));
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << r->body;
  }
}

TEST(ServerHttp, HealthModelsMetrics) {
  TestServer ts;
  auto h = ts.get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto m = ts.get("/v1/models");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200);
  Json models = parse(m);
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], ts.model);
  EXPECT_EQ(ts.get("/v1/models/" + ts.model)->status, 200);
  expect_error_shape(ts.get("/v1/models/other"), 404, "model_not_found");
  auto metrics = ts.get("/metrics");
  ASSERT_EQ(metrics->status, 200);
  for (const char* name : {"dsv4_requests_total", "dsv4_prompt_tokens_total", "dsv4_generation_tokens_total",
                           "dsv4_queue_depth", "dsv4_running_sequences", "dsv4_pool_blocks",
                           "dsv4_time_to_first_token_seconds_bucket", "dsv4_inter_token_latency_seconds_bucket",
                           "dsv4_spec_acceptance_ratio"}) {
    EXPECT_NE(metrics->body.find(name), std::string::npos) << name;
  }
  const std::string health_line = "dsv4_requests_total{endpoint=\"/health\",status=\"200\"} 1";
  EXPECT_NE(metrics_with(ts, {health_line}).find(health_line), std::string::npos);
}

TEST(ServerHttp, ChatSplitsReasoningAndCountsTokens) {
  TestServer ts;
  const std::string reasoning = "Let me think about it.";
  const std::string answer = "The answer is 42, café.";
  ts.engine.set_script([&](const GenerationRequest&) { return reasoning + "</think>" + answer; });
  auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "question?"));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = parse(r);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const Json& msg = j["choices"][0]["message"];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["content"], answer);
  EXPECT_EQ(msg["reasoning_content"], reasoning);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // Oracles: the fake engine's own tokenization of the scripted text and the prompt it received.
  const auto all = FakeEngine::split_tokens(reasoning + "</think>" + answer);
  const auto before = FakeEngine::split_tokens(reasoning);
  EXPECT_EQ(j["usage"]["completion_tokens"], all.size());
  EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], before.size() + 1);  // + </think>
  EXPECT_EQ(j["usage"]["prompt_tokens"], ts.engine.last_request().prompt_ids.size());
  EXPECT_EQ(j["usage"]["total_tokens"], j["usage"]["prompt_tokens"].get<int>() + all.size());
}

TEST(ServerHttp, ThinkingOffGivesContentOnly) {
  TestServer ts;
  ts.engine.set_script([](const GenerationRequest&) { return std::string("plain answer"); });
  for (const Json& extra : {Json{{"chat_template_kwargs", {{"thinking", false}}}}, Json{{"reasoning_effort", "none"}},
                            Json{{"thinking", {{"type", "disabled"}}}}}) {
    auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "hi", extra));
    ASSERT_EQ(r->status, 200) << r->body;
    Json j = parse(r);
    EXPECT_EQ(j["choices"][0]["message"]["content"], "plain answer");
    EXPECT_FALSE(j["choices"][0]["message"].contains("reasoning_content"));
    EXPECT_EQ(j["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);
  }
}

TEST(ServerHttp, StreamingChatFramingAndEquivalence) {
  TestServer ts;
  ts.engine.set_script([](const GenerationRequest&) { return std::string("Think 日本.</think>Answer über alles."); });
  auto full = ts.post("/v1/chat/completions", chat_body(ts.model, "q"));
  ASSERT_EQ(full->status, 200);
  Json fj = parse(full);

  auto r = ts.post("/v1/chat/completions",
                   chat_body(ts.model, "q", {{"stream", true}, {"stream_options", {{"include_usage", true}}}}));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  auto events = sse_payloads(r->body);
  ASSERT_GE(events.size(), 4u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string content, reasoning, finish;
  std::set<std::string> ids;
  Json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    Json c = Json::parse(events[i]);
    ids.insert(c["id"].get<std::string>());
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    ASSERT_TRUE(c.contains("usage"));  // null on every chunk but the last when include_usage
    if (!c["usage"].is_null()) {
      usage = c["usage"];
      EXPECT_TRUE(c["choices"].empty());
      EXPECT_EQ(i + 2, events.size()) << "usage chunk must be the last before [DONE]";
      continue;
    }
    const Json& d = c["choices"][0]["delta"];
    if (i == 0) {
      EXPECT_EQ(d["role"], "assistant");
    }
    if (d.contains("content")) content += d["content"].get<std::string>();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(ids.size(), 1u);
  EXPECT_EQ(content, fj["choices"][0]["message"]["content"]);
  EXPECT_EQ(reasoning, fj["choices"][0]["message"]["reasoning_content"]);
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(usage["completion_tokens"], fj["usage"]["completion_tokens"]);
  EXPECT_EQ(usage["completion_tokens_details"]["reasoning_tokens"],
            fj["usage"]["completion_tokens_details"]["reasoning_tokens"]);
}

TEST(ServerHttp, CompletionsPlainAndStreaming) {
  TestServer ts;
  ts.engine.set_script([](const GenerationRequest& r) { return "echo " + std::to_string(r.prompt_ids.size()); });
  Json body = {{"model", ts.model}, {"prompt", "Hello"}};
  auto r = ts.post("/v1/completions", body.dump());
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = parse(r);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["text"], "echo 5");  // SimpleCodec: one token per byte
  EXPECT_EQ(j["usage"]["prompt_tokens"], 5);

  body["stream"] = true;
  auto s = ts.post("/v1/completions", body.dump());
  ASSERT_EQ(s->status, 200);
  auto events = sse_payloads(s->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) text += Json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "echo 5");

  // Token-id prompts are accepted and checked against the vocabulary.
  auto ids = ts.post("/v1/completions", Json{{"model", ts.model}, {"prompt", {5, 6, 7}}}.dump());
  ASSERT_EQ(ids->status, 200);
  EXPECT_EQ(parse(ids)["choices"][0]["text"], "echo 3");
  expect_error_shape(ts.post("/v1/completions", Json{{"model", ts.model}, {"prompt", {5, 200000}}}.dump()), 400,
                     "invalid_value");
}

TEST(ServerHttp, MaxTokensStopAndLength) {
  TestServer ts;
  ts.engine.set_script([](const GenerationRequest&) { return std::string("</think>abc STOP def ghi"); });
  auto r = ts.post("/v1/chat/completions", chat_body(ts.model, "x", {{"max_completion_tokens", 3}}));
  ASSERT_EQ(r->status, 200);
  Json j = parse(r);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);

  auto s = ts.post("/v1/chat/completions", chat_body(ts.model, "x", {{"stop", {"STOP"}}}));
  ASSERT_EQ(s->status, 200);
  Json sj = parse(s);
  EXPECT_EQ(sj["choices"][0]["message"]["content"], "abc ");
  EXPECT_EQ(sj["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ts.engine.last_request().stop.stop_strings, std::vector<std::string>{"STOP"});

  // A stop string split across tokens is matched too, streaming, and never leaks a prefix.
  auto st = ts.post("/v1/chat/completions", chat_body(ts.model, "x", {{"stop", "P def"}, {"stream", true}}));
  std::string content;
  auto events = sse_payloads(st->body);
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Json c = Json::parse(events[i]);
    const Json& d = c["choices"][0]["delta"];
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(content, "abc STO") << st->body;
}

TEST(ServerHttp, SamplingFieldsReachTheEngine) {
  TestServer ts;
  auto r = ts.post("/v1/chat/completions",
                   chat_body(ts.model, "x", {{"temperature", 0.5}, {"top_p", 0.9}, {"seed", 1234}, {"max_tokens", 7}}));
  ASSERT_EQ(r->status, 200);
  GenerationRequest g = ts.engine.last_request();
  EXPECT_FLOAT_EQ(g.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.sampling.top_p, 0.9f);
  ASSERT_TRUE(g.sampling.seed.has_value());
  EXPECT_EQ(*g.sampling.seed, 1234u);
  EXPECT_EQ(g.stop.max_tokens, 7);
  EXPECT_EQ(g.sampling.top_logprobs, -1);
}

TEST(ServerHttp, NChoicesAndLogprobs) {
  TestServer ts;
  auto r = ts.post("/v1/chat/completions",
                   chat_body(ts.model, "x", {{"n", 3}, {"temperature", 1.0}, {"seed", 7}, {"logprobs", true},
                                             {"top_logprobs", 2}, {"chat_template_kwargs", {{"thinking", false}}}}));
  ASSERT_EQ(r->status, 200) << r->body;
  Json j = parse(r);
  ASSERT_EQ(j["choices"].size(), 3u);
  std::set<std::string> texts;
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const Json& c = j["choices"][i];
    EXPECT_EQ(c["index"], i);
    texts.insert(c["message"]["content"].get<std::string>());
    const Json& lp = c["logprobs"]["content"];
    ASSERT_TRUE(lp.is_array());
    total += static_cast<int64_t>(lp.size());
    std::string joined;
    for (const Json& t : lp) {
      EXPECT_EQ(t["top_logprobs"].size(), 2u);
      EXPECT_LE(t["logprob"].get<double>(), 0.0);
      joined += t["token"].get<std::string>();
    }
    EXPECT_EQ(joined, c["message"]["content"]);  // the tokens spell the content
  }
  EXPECT_EQ(texts.size(), 3u) << "seed + i per choice: the choices differ";
  EXPECT_EQ(j["usage"]["completion_tokens"], total);
}

TEST(ServerHttp, ContextLimitReportsBothCounts) {
  testing::FakeEngineOptions eo;
  eo.context_size = 300;
  TestServer ts(eo);
  const std::string user(100, 'a');
  auto r = ts.post("/v1/chat/completions", chat_body(ts.model, user, {{"max_tokens", 250}}));
  expect_error_shape(r, 400, "context_length_exceeded");
  const std::string prompt_len = std::to_string(ts.codec->encode_chat([&] {
    ChatCompletionRequest c;
    c.messages.push_back(ApiMessage{"user", user, {}, {}, {}, {}});
    return c;
  }())->size());
  const std::string msg = parse(r)["error"]["message"];
  EXPECT_NE(msg.find("300"), std::string::npos) << msg;
  EXPECT_NE(msg.find(prompt_len + " in the prompt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("250"), std::string::npos) << msg;
  // Without max_tokens the completion gets the rest of the context.
  auto ok = ts.post("/v1/chat/completions", chat_body(ts.model, user));
  ASSERT_EQ(ok->status, 200);
  EXPECT_EQ(ts.engine.last_request().stop.max_tokens, 300 - std::stoi(prompt_len));
  // --ctx-size lowers the engine's context.
  ServerOptions so;
  so.ctx_size = 150;
  TestServer small(eo, so);
  expect_error_shape(small.post("/v1/chat/completions", chat_body(small.model, user, {{"max_tokens", 100}})), 400,
                     "context_length_exceeded");
}

TEST(ServerHttp, UnknownModelIs404) {
  TestServer ts;
  expect_error_shape(ts.post("/v1/chat/completions", chat_body("gpt-4", "x")), 404, "model_not_found");
  expect_error_shape(ts.post("/v1/completions", Json{{"model", "gpt-4"}, {"prompt", "x"}}.dump()), 404,
                     "model_not_found");
}

TEST(ServerHttp, ApiKeyProtectsEverythingButHealth) {
  ServerOptions so;
  so.api_key = "sk-test-0123456789";
  TestServer ts({}, so);
  const httplib::Headers good = {{"Authorization", "Bearer sk-test-0123456789"}};
  EXPECT_EQ(ts.get("/health")->status, 200);
  for (const char* path : {"/v1/models", "/metrics"}) {
    expect_error_shape(ts.get(path), 401, "invalid_api_key");
    expect_error_shape(ts.get(path, {{"Authorization", "Bearer sk-test-012345678"}}), 401, "invalid_api_key");
    expect_error_shape(ts.get(path, {{"Authorization", "Bearer sk-test-0123456789x"}}), 401, "invalid_api_key");
    expect_error_shape(ts.get(path, {{"Authorization", "sk-test-0123456789"}}), 401, "invalid_api_key");
    EXPECT_EQ(ts.get(path, good)->status, 200) << path;
  }
  expect_error_shape(ts.post("/v1/chat/completions", chat_body(ts.model, "x")), 401, "invalid_api_key");
  expect_error_shape(ts.post("/v1/completions", "{}"), 401, "invalid_api_key");
  expect_error_shape(ts.get("/no/such/route"), 401, "invalid_api_key");  // no route probing without a key
  EXPECT_EQ(ts.post("/v1/chat/completions", chat_body(ts.model, "x"), good)->status, 200);
  EXPECT_EQ(ts.engine.submitted(), 1);  // unauthenticated requests never reached the engine
}

TEST(ServerHttp, CorsOffByDefaultOnWhenAsked) {
  TestServer off;
  auto r = off.get("/v1/models");
  EXPECT_FALSE(r->has_header("Access-Control-Allow-Origin"));
  EXPECT_EQ(off.client().Options("/v1/models")->status, 404);
  ServerOptions so;
  so.cors_origin = "https://app.example";
  TestServer on({}, so);
  EXPECT_EQ(on.get("/v1/models")->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(on.client().Options("/v1/chat/completions")->status, 204);
}

TEST(ServerHttp, BodyAndDepthLimits) {
  ServerOptions so;
  so.limits.max_body_bytes = 2048;
  so.limits.max_json_depth = 16;
  TestServer ts({}, so);
  expect_error_shape(ts.post("/v1/chat/completions", chat_body(ts.model, std::string(4000, 'x'))), 413, "");
  std::string deep = chat_body(ts.model, "x");
  deep.insert(deep.size() - 1, ",\"metadata\":" + std::string(20, '[') + std::string(20, ']'));
  expect_error_shape(ts.post("/v1/chat/completions", deep), 400, "json_too_deep");
  EXPECT_EQ(ts.get("/health")->status, 200);
}

TEST(ServerHttp, ErrorStatusesAreCountedInMetrics) {
  TestServer ts;
  ts.post("/v1/chat/completions", "{");
  ts.post("/v1/chat/completions", chat_body(ts.model, "x"));
  const std::string bad = "dsv4_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1";
  const std::string good = "dsv4_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1";
  const std::string m = metrics_with(ts, {bad, good});
  EXPECT_NE(m.find("dsv4_requests_total{endpoint=\"/v1/chat/completions\",status=\"400\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("dsv4_requests_total{endpoint=\"/v1/chat/completions\",status=\"200\"} 1"), std::string::npos) << m;
  EXPECT_NE(m.find("dsv4_time_to_first_token_seconds_count 1"), std::string::npos) << m;
}

}  // namespace
}  // namespace dsv4::server::test
