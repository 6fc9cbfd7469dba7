// tests/server: reliability.md §B1/§B2 — every malformed or out-of-range request is a 4xx with the
// OpenAI error JSON (never a 5xx, never a crash); a bounded HTTP fuzz of mutated bodies keeps /health 200,
// and an in-process fuzz runs 100k bodies through the parsers and the chat renderer.
#include <random>

#include "server/api_error.h"
#include "server/deepseek_codec.h"
#include "server/request_parser.h"
#include "server_fixture.h"
#include "test_util.h"

namespace dsv4::server::test {
namespace {

struct Case {
  const char* name;
  const char* path;
  std::string body;
  int status;
  const char* code;  // expected error.code ("" = any)
};

std::string with(const std::string& fields) {
  // A valid chat body with `fields` appended (they override earlier keys: last one wins in nlohmann).
  return R"({"model":"fake-dsv4","messages":[{"role":"user","content":"hi"}])" + (fields.empty() ? "" : "," + fields) +
         "}";
}
std::string cmpl(const std::string& fields) {
  return R"({"model":"fake-dsv4","prompt":"hi")" + (fields.empty() ? "" : "," + fields) + "}";
}

std::vector<Case> malformed_cases() {
  const char* C = "/v1/chat/completions";
  const char* P = "/v1/completions";
  return {
      // JSON syntax and shape
      {"empty body", C, "", 400, "invalid_json"},
      {"not json", C, "hello", 400, "invalid_json"},
      {"truncated", C, R"({"model":"fake-dsv4","messages":[)", 400, "invalid_json"},
      {"trailing garbage", C, with("") + "x", 400, "invalid_json"},
      {"array body", C, "[]", 400, "invalid_json"},
      {"string body", C, "\"x\"", 400, "invalid_json"},
      {"null body", C, "null", 400, "invalid_json"},
      {"invalid utf8", C, with("") .substr(0, 50) + "\xff\xfe\"}]}", 400, "invalid_json"},
      {"nan literal", C, with(R"("temperature":NaN)"), 400, "invalid_json"},
      {"deep nesting", C, with(R"("metadata":)" + std::string(200, '[') + std::string(200, ']')), 400, "json_too_deep"},
      {"huge number", C, with(R"("max_tokens":1e999)"), 400, ""},
      // model
      {"missing model", C, R"({"messages":[{"role":"user","content":"hi"}]})", 400, "missing_field"},
      {"model not string", C, R"({"model":5,"messages":[{"role":"user","content":"hi"}]})", 400, "invalid_type"},
      {"unknown model", C, R"({"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]})", 404, "model_not_found"},
      // messages
      {"missing messages", C, R"({"model":"fake-dsv4"})", 400, "missing_field"},
      {"messages not array", C, R"({"model":"fake-dsv4","messages":{}})", 400, "invalid_type"},
      {"messages empty", C, R"({"model":"fake-dsv4","messages":[]})", 400, "invalid_value"},
      {"message not object", C, R"({"model":"fake-dsv4","messages":["hi"]})", 400, "invalid_type"},
      {"missing role", C, R"({"model":"fake-dsv4","messages":[{"content":"hi"}]})", 400, "missing_field"},
      {"bad role", C, R"({"model":"fake-dsv4","messages":[{"role":"wizard","content":"hi"}]})", 400, "invalid_value"},
      {"role not string", C, R"({"model":"fake-dsv4","messages":[{"role":1,"content":"hi"}]})", 400, "invalid_type"},
      {"user without content", C, R"({"model":"fake-dsv4","messages":[{"role":"user"}]})", 400, "missing_field"},
      {"content number", C, R"({"model":"fake-dsv4","messages":[{"role":"user","content":5}]})", 400, "invalid_type"},
      {"content part not object", C, R"({"model":"fake-dsv4","messages":[{"role":"user","content":[1]}]})", 400, "invalid_type"},
      {"image part", C, R"({"model":"fake-dsv4","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", 400, "unsupported_content"},
      {"text part without text", C, R"({"model":"fake-dsv4","messages":[{"role":"user","content":[{"type":"text"}]}]})", 400, "invalid_type"},
      {"tool msg without id", C, R"({"model":"fake-dsv4","messages":[{"role":"tool","content":"x"}]})", 400, "missing_field"},
      {"assistant empty", C, R"({"model":"fake-dsv4","messages":[{"role":"assistant"}]})", 400, "missing_field"},
      {"tool_calls not array", C, R"({"model":"fake-dsv4","messages":[{"role":"assistant","tool_calls":{}}]})", 400, "invalid_type"},
      {"tool_call without function", C, R"({"model":"fake-dsv4","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function"}]}]})", 400, "missing_field"},
      {"tool_call bad type", C, R"({"model":"fake-dsv4","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"x","function":{"name":"f"}}]}]})", 400, "invalid_value"},
      {"reasoning_content not string", C, R"({"model":"fake-dsv4","messages":[{"role":"assistant","content":"a","reasoning_content":[]}]})", 400, "invalid_type"},
      // sampling ranges and types
      {"temperature string", C, with(R"("temperature":"hot")"), 400, "invalid_type"},
      {"temperature negative", C, with(R"("temperature":-0.1)"), 400, "invalid_value"},
      {"temperature too high", C, with(R"("temperature":2.5)"), 400, "invalid_value"},
      {"top_p zero", C, with(R"("top_p":0)"), 400, "invalid_value"},
      {"top_p above one", C, with(R"("top_p":1.5)"), 400, "invalid_value"},
      {"top_k negative", C, with(R"("top_k":-1)"), 400, "invalid_value"},
      {"min_p above one", C, with(R"("min_p":2)"), 400, "invalid_value"},
      {"frequency_penalty range", C, with(R"("frequency_penalty":3)"), 400, "invalid_value"},
      {"presence_penalty type", C, with(R"("presence_penalty":true)"), 400, "invalid_type"},
      {"max_tokens zero", C, with(R"("max_tokens":0)"), 400, "invalid_value"},
      {"max_tokens negative", C, with(R"("max_tokens":-5)"), 400, "invalid_value"},
      {"max_tokens float", C, with(R"("max_tokens":10.5)"), 400, "invalid_type"},
      {"max_tokens string", C, with(R"("max_tokens":"10")"), 400, "invalid_type"},
      {"max_tokens over int32", C, with(R"("max_tokens":4294967296)"), 400, "invalid_value"},
      {"max_completion_tokens negative", C, with(R"("max_completion_tokens":-1)"), 400, "invalid_value"},
      {"max_tokens over context", C, with(R"("max_tokens":100000)"), 400, "context_length_exceeded"},
      {"seed negative", C, with(R"("seed":-1)"), 400, "invalid_value"},
      {"seed string", C, with(R"("seed":"1")"), 400, "invalid_type"},
      {"n zero", C, with(R"("n":0)"), 400, "invalid_value"},
      {"n negative", C, with(R"("n":-3)"), 400, "invalid_value"},
      {"n too large", C, with(R"("n":1000000)"), 400, "invalid_value"},
      {"best_of differs", C, with(R"("best_of":4)"), 400, "unsupported_parameter"},
      {"stop number", C, with(R"("stop":5)"), 400, "invalid_type"},
      {"stop array of numbers", C, with(R"("stop":[1,2])"), 400, "invalid_type"},
      {"stop too many", C, with(R"("stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"])"), 400, "invalid_value"},
      {"stop too long", C, with(R"("stop":[")" + std::string(300, 's') + "\"]"), 400, "invalid_value"},
      {"stop empty string", C, with(R"("stop":[""])"), 400, "invalid_value"},
      {"logprobs not bool", C, with(R"("logprobs":1)"), 400, "invalid_type"},
      {"top_logprobs without logprobs", C, with(R"("top_logprobs":3)"), 400, "invalid_value"},
      {"top_logprobs over 20", C, with(R"("logprobs":true,"top_logprobs":21)"), 400, "invalid_value"},
      {"top_logprobs negative", C, with(R"("logprobs":true,"top_logprobs":-1)"), 400, "invalid_value"},
      {"stream not bool", C, with(R"("stream":"yes")"), 400, "invalid_type"},
      {"stream_options without stream", C, with(R"("stream_options":{"include_usage":true})"), 400, "invalid_value"},
      {"stream_options not object", C, with(R"("stream":true,"stream_options":1)"), 400, "invalid_type"},
      {"include_usage not bool", C, with(R"("stream":true,"stream_options":{"include_usage":"y"})"), 400, "invalid_type"},
      // tools and reasoning
      {"tools not array", C, with(R"("tools":{})"), 400, "invalid_type"},
      {"tool without function", C, with(R"("tools":[{"type":"function"}])"), 400, "missing_field"},
      {"tool bad name", C, with(R"("tools":[{"type":"function","function":{"name":"a b\"c"}}])"), 400, "invalid_value"},
      {"tool duplicate name", C, with(R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])"), 400, "invalid_value"},
      {"tool parameters not object", C, with(R"("tools":[{"type":"function","function":{"name":"f","parameters":"x"}}])"), 400, "invalid_type"},
      {"tool_choice unknown string", C, with(R"("tool_choice":"always")"), 400, "invalid_value"},
      {"tool_choice required without tools", C, with(R"("tool_choice":"required")"), 400, "invalid_value"},
      {"tool_choice names unknown tool", C, with(R"("tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}})"), 400, "invalid_value"},
      {"tool_choice number", C, with(R"("tool_choice":3)"), 400, "invalid_type"},
      {"reasoning_effort unknown", C, with(R"("reasoning_effort":"extreme")"), 400, "invalid_value"},
      {"chat_template_kwargs not object", C, with(R"("chat_template_kwargs":[])"), 400, "invalid_type"},
      {"thinking flag not bool", C, with(R"("chat_template_kwargs":{"thinking":"on"})"), 400, "invalid_type"},
      {"thinking type unknown", C, with(R"("thinking":{"type":"maybe"})"), 400, "invalid_value"},
      {"response_format json_schema", C, with(R"("response_format":{"type":"json_schema"})"), 400, "unsupported_parameter"},
      {"response_format unknown", C, with(R"("response_format":{"type":"xml"})"), 400, "invalid_value"},
      {"response_format not object", C, with(R"("response_format":"json")"), 400, "invalid_type"},
      // /v1/completions
      {"cmpl missing prompt", P, R"({"model":"fake-dsv4"})", 400, "missing_field"},
      {"cmpl prompt number", P, R"({"model":"fake-dsv4","prompt":5})", 400, "invalid_type"},
      {"cmpl prompt empty array", P, R"({"model":"fake-dsv4","prompt":[]})", 400, "invalid_value"},
      {"cmpl prompt batch", P, R"({"model":"fake-dsv4","prompt":["a","b"]})", 400, "unsupported_parameter"},
      {"cmpl negative token id", P, R"({"model":"fake-dsv4","prompt":[1,-2]})", 400, "invalid_value"},
      {"cmpl token id past vocab", P, R"({"model":"fake-dsv4","prompt":[1,99999999]})", 400, "invalid_value"},
      {"cmpl token id float", P, R"({"model":"fake-dsv4","prompt":[1,2.5]})", 400, "invalid_type"},
      {"cmpl empty prompt", P, cmpl(R"("prompt":"")"), 400, "empty_prompt"},
      {"cmpl logprobs over limit", P, cmpl(R"("logprobs":21)"), 400, "invalid_value"},
      {"cmpl echo", P, cmpl(R"("echo":true)"), 400, "unsupported_parameter"},
      {"cmpl suffix", P, cmpl(R"("suffix":"x")"), 400, "unsupported_parameter"},
      {"cmpl unknown model", P, R"({"model":"x","prompt":"hi"})", 404, "model_not_found"},
      // routes
      {"unknown route", "/v1/embeddings", with(""), 404, "not_found"},
  };
}

void check_error_response(const httplib::Result& r, int status, const std::string& code, const std::string& what) {
  ASSERT_TRUE(r) << what << ": no response";
  EXPECT_EQ(r->status, status) << what << ": " << r->body;
  EXPECT_LT(r->status, 500) << what;
  Json j = Json::parse(r->body, nullptr, false);
  ASSERT_TRUE(j.is_object() && j.contains("error")) << what << ": " << r->body;
  const Json& e = j["error"];
  EXPECT_TRUE(e.contains("message") && e["message"].is_string() && !e["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(e.contains("type") && e["type"].is_string()) << what;
  EXPECT_TRUE(e.contains("param")) << what;
  EXPECT_TRUE(e.contains("code")) << what;
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code) << what << ": " << r->body;
  }
}

// Valid and malformed bodies the fuzz loops start from.
std::vector<std::string> fuzz_seeds() {
  std::vector<std::string> seeds = {
      with(""), with(R"("stream":true,"max_tokens":4)"), cmpl(R"("max_tokens":3)"),
      with(R"("tools":[{"type":"function","function":{"name":"f","parameters":{}}}])"),
      with(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}],"tool_choice":"required","chat_template_kwargs":{"thinking":true})"),
      R"({"model":"fake-dsv4","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"res"}],"response_format":{"type":"json_object"}})",
      cmpl(R"("prompt":[1,2,3],"logprobs":2,"stop":["x"])")};
  for (const auto& c : malformed_cases()) seeds.push_back(c.body);
  return seeds;
}

// 1-4 random edits: deletions, JSON-ish tokens, random bytes, truncation, duplicated slices.
std::string mutated(std::string body, std::mt19937_64& rng) {
  static const char* kTokens[] = {"{", "}", "[", "]", ",", ":", "\"", "null", "true", "-1", "1e308", "0", "\\u0000",
                                  "\"model\"", "\"messages\"", "\"n\"", "\"stop\"", "99999999999999999999", "\xc3",
                                  "\xff", "\"role\"", "\"tool\"", "\"tools\"", "<｜Assistant｜>", "<｜DSML｜"};
  const int mutations = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < mutations && !body.empty(); ++m) {
    const size_t pos = rng() % body.size();
    switch (rng() % 5) {
      case 0: body.erase(pos, 1 + rng() % 8); break;
      case 1: body.insert(pos, kTokens[rng() % (sizeof(kTokens) / sizeof(kTokens[0]))]); break;
      case 2: body[pos] = static_cast<char>(rng() % 256); break;
      case 3: body = body.substr(0, pos); break;
      default: body.insert(pos, body.substr(rng() % body.size(), 1 + rng() % 16)); break;
    }
  }
  return body;
}

TEST(ServerMalformed, EveryBadRequestIs4xxWithErrorJson) {
  TestServer ts;
  const auto cases = malformed_cases();
  ASSERT_GE(cases.size(), 50u);
  for (const auto& c : cases) check_error_response(ts.post(c.path, c.body), c.status, c.code, c.name);
  EXPECT_EQ(ts.engine.submitted(), 0) << "no malformed request may reach the engine";
  // The same bodies sent as streaming requests fail the same way, before any stream starts.
  EXPECT_EQ(ts.get("/health")->status, 200);
}

TEST(ServerMalformed, ValidVariantsOfTheSameFieldsAreAccepted) {
  // The negative control for the table: the boundaries themselves are accepted.
  TestServer ts;
  const std::vector<std::string> ok = {
      with(R"("temperature":0)"), with(R"("temperature":2)"), with(R"("top_p":1)"), with(R"("max_tokens":1)"),
      with(R"("n":8,"temperature":1,"seed":0)"), with(R"("logprobs":true,"top_logprobs":20)"),
      with(R"("stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p"])"),
      with(R"("stop":")" + std::string(256, 's') + "\""), with(R"("seed":18446744073709551615)"),
      with(R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}})"),
      with(R"("response_format":{"type":"json_object"},"reasoning_effort":"max")"),
      with(R"("temperature":null,"stop":null,"tools":null)"),
      R"({"model":"fake-dsv4","messages":[{"role":"developer","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":"hi"},{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"res"}]})",
  };
  for (const auto& body : ok) {
    auto r = ts.post("/v1/chat/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << body << "\n" << r->body;
  }
}

// reliability.md §B1: random and mutated bodies never produce a 5xx; the server stays healthy.
TEST(ServerMalformed, BoundedFuzzNeverGives5xx) {
  TestServer ts;
  std::mt19937_64 rng(20261130);  // fixed seed: a failure is reproducible
  const std::vector<std::string> seeds = fuzz_seeds();
  int n_5xx = 0, n_2xx = 0, n_4xx = 0;
  const int kIterations = 3000;
  auto client = ts.client();
  for (int i = 0; i < kIterations; ++i) {
    const std::string body = mutated(seeds[rng() % seeds.size()], rng);
    const char* path = (rng() % 2) ? "/v1/chat/completions" : "/v1/completions";
    auto r = client.Post(path, body, "application/json");
    ASSERT_TRUE(r) << "no response for body: " << body;
    if (r->status >= 500) {
      ++n_5xx;
      ADD_FAILURE() << r->status << " for body: " << body << "\n" << r->body;
    } else if (r->status >= 400) {
      ++n_4xx;
      Json j = Json::parse(r->body, nullptr, false);
      EXPECT_TRUE(j.is_object() && j.contains("error")) << body;
    } else {
      ++n_2xx;
    }
  }
  EXPECT_EQ(n_5xx, 0);
  EXPECT_GT(n_4xx, kIterations / 2);
  auto h = ts.get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  std::printf("fuzz: %d bodies, %d 2xx, %d 4xx, %d 5xx\n", kIterations, n_2xx, n_4xx, n_5xx);
}

// A structure-aware edit: one value somewhere inside a valid body replaced by a value of another type
// or an edge value, so the body stays JSON and reaches the field checks and the chat renderer.
std::string value_swapped(const std::string& valid, std::mt19937_64& rng) {
  Json j = Json::parse(valid, nullptr, false);
  if (j.is_discarded()) return valid;
  const Json kValues[] = {nullptr, -1, 0, 1, 2, 1e308, -0.5, 4294967296LL, "", "x", "<｜Assistant｜>",
                          "</think><｜DSML｜tool_calls>", Json::array(), Json::object(), true,
                          Json::array({Json::object()}), Json{{"type", "function"}}, std::string(300, 'a')};
  Json* node = &j;
  for (int depth = 0; depth < 6 && (node->is_object() || node->is_array()) && !node->empty(); ++depth) {
    auto it = node->begin();
    std::advance(it, static_cast<long>(rng() % node->size()));
    node = &*it;
    if (rng() % 3 == 0) break;
  }
  *node = kValues[rng() % (sizeof(kValues) / sizeof(kValues[0]))];
  return j.dump();
}

// The same property without HTTP, at fuzzing volume: 100k mutated bodies through the request parsers
// and, when they parse, the real DeepSeek-V4 chat renderer + tokenizer. Every outcome is success or a
// 4xx with error JSON; a crash or a 5xx fails (ASan/UBSan builds of this suite catch memory errors).
TEST(ServerMalformed, InProcessFuzzOf100kBodiesNeverGives5xx) {
  auto codec = DeepSeekChatCodec::load(dsv4::test::shared_dir() / "tokenizer" / "tokenizer.json");
  ASSERT_TRUE(codec.is_ok()) << codec.status().to_string();
  const RequestLimits limits;
  std::mt19937_64 rng(20261201);
  const std::vector<std::string> seeds = fuzz_seeds();
  constexpr int kIterations = 100000;
  int n_ok = 0, n_4xx = 0, n_bad = 0;
  auto check = [&](const ApiError& e, const std::string& body) {
    const Json j = Json::parse(e.to_json(), nullptr, false);
    const bool good = e.http_status >= 400 && e.http_status < 500 && j.is_object() && j.contains("error") &&
                      j["error"].contains("message");
    if (!good && ++n_bad <= 5) ADD_FAILURE() << e.http_status << " " << e.to_json() << " for body: " << body;
    ++n_4xx;
  };
  for (int i = 0; i < kIterations; ++i) {
    const std::string& seed = seeds[rng() % seeds.size()];
    const std::string body = rng() % 2 ? value_swapped(seed, rng) : mutated(seed, rng);
    if (rng() % 2) {
      ChatCompletionRequest req;
      if (auto err = parse_chat_request(body, limits, &req)) {
        check(*err, body);
        continue;
      }
      auto ids = codec.value()->encode_chat(req);
      if (!ids.is_ok()) {
        check(api_error_from_status(ids.status()), body);
        continue;
      }
    } else {
      CompletionRequest req;
      if (auto err = parse_completion_request(body, limits, &req)) {
        check(*err, body);
        continue;
      }
      if (req.prompt_text) {
        auto ids = codec.value()->encode_text(*req.prompt_text);
        if (!ids.is_ok()) {
          check(api_error_from_status(ids.status()), body);
          continue;
        }
      }
    }
    ++n_ok;
  }
  EXPECT_EQ(n_bad, 0);
  EXPECT_GT(n_4xx, kIterations / 2);
  EXPECT_GT(n_ok, 1000) << "the mutations should leave many bodies valid";
  std::printf("in-process fuzz: %d bodies, %d accepted, %d 4xx, %d bad\n", kIterations, n_ok, n_4xx, n_bad);
}

}  // namespace
}  // namespace dsv4::server::test
