// tests/server: the official `openai` npm client (tests/js/openai_e2e.js) against the server on
// 127.0.0.1:<ephemeral>, over the FakeEngine with completions injected per prompt.
#include <thread>

#include "server/deepseek_codec.h"
#include "openai_client.h"
#include "server_fixture.h"
#include "test_util.h"

namespace dsv4::server::test {
namespace {

using namespace std::chrono_literals;

// The prompt as text: SimpleCodec maps byte b to id b + 3.
std::string prompt_text(const GenerationRequest& r) {
  std::string s;
  for (int32_t id : r.prompt_ids) s.push_back(static_cast<char>(id - 3));
  return s;
}

// The injected completion the JS script expects (see tests/js/openai_e2e.js) for prompt text P.
std::string e2e_reply(const std::string& p) {
  const bool thinking = p.size() >= 7 && p.compare(p.size() - 7, 7, "<think>") == 0;
  if (p.find("talk forever") != std::string::npos) {
    std::string t = "</think>";
    for (int i = 0; i < 5000; ++i) t += "blah ";
    return t;
  }
  if (p.find("say hello") != std::string::npos) {
    return thinking ? "Greeting the user.</think>Hello from dsv4!" : "Hello from dsv4!";
  }
  if (p.find("Once upon") != std::string::npos) return " a time, there was a server.";
  return "</think>ok";
}

std::string e2e_script(const GenerationRequest& r) { return e2e_reply(prompt_text(r)); }

// Runs the JS client against `ts`; checks the aborted "talk forever" stream was cancelled.
void run_e2e(TestServer& ts, const std::string& flags) {
  ASSERT_NO_FATAL_FAILURE(run_openai_client("openai_e2e.js", ts.server->port(), "dsv4-test sk-e2e-key" + flags, 300s));
  // The aborted stream ("talk forever") was cancelled in the engine and its blocks came back.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (ts.engine.cancels_applied() < 1 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ts.engine.cancels_applied(), 1);
  while (ts.engine.stats().pool_blocks_free != ts.engine.stats().pool_blocks_total &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_EQ(ts.engine.stats().pool_blocks_free, ts.engine.stats().pool_blocks_total);
}

ServerOptions e2e_options() {
  ServerOptions so;
  so.api_key = "sk-e2e-key";
  so.served_model_name = "dsv4-test";
  return so;
}

testing::FakeEngineOptions e2e_engine() {
  testing::FakeEngineOptions eo;
  eo.step_time = 200us;
  return eo;
}

TEST(OpenAiE2E, OfficialClientAgainstTheServer) {
  TestServer ts(e2e_engine(), e2e_options());
  ts.engine.set_script(e2e_script);
  run_e2e(ts, "");
}

// The same client over the real DeepSeek-V4 tokenizer/chat layer, plus the tool-call round trip: the
// injected completion is DSML, which must reach the client as tool_calls and go back as a tool turn.
TEST(OpenAiE2E, OfficialClientToolRoundTripWithTheDeepSeekCodec) {
  auto loaded = DeepSeekChatCodec::load(dsv4::test::shared_dir() / "tokenizer" / "tokenizer.json");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const DeepSeekChatCodec* codec = loaded.value().get();
  TestServer ts(e2e_engine(), e2e_options(), std::move(loaded).value());
  ts.engine.set_script([codec](const GenerationRequest& r) -> std::string {
    const std::string p = codec->tokenizer().decode(r.prompt_ids);
    if (p.find("<tool_result>Paris: 15C</tool_result>") != std::string::npos) {
      return "Summarize.</think>It is 15C in Paris.<｜end▁of▁sentence｜>";
    }
    if (p.find("weather in Paris?") != std::string::npos) {
      return "Need a tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
             "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
             "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
             "</｜DSML｜tool_calls><｜end▁of▁sentence｜>";
    }
    return e2e_reply(p);
  });
  run_e2e(ts, " --tools");
}

}  // namespace
}  // namespace dsv4::server::test
