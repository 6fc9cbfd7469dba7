// e2e: the tokenizer and chat subcommands of the `dsv4` CLI, end to end: render-chat reproduces the
// official encoder vectors byte for byte, parse-completion turns a reference completion back into
// the message, tokenize/detokenize give the spec's V4 ids and round-trip text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

std::string cli() {
  return "'" + test::cli_path().string() + "'";
}
std::string tokenizer_json() {
  return "'" + (test::shared_dir() / "tokenizer" / "tokenizer.json").string() + "'";
}
fs::path vectors() {
  return test::shared_dir() / "spec" / "official" / "encoding-tests";
}

TEST(TokenizerCli, RenderChatPrintsOfficialVectorsExactly) {
  test::TempDir tmp;
  for (const char* n : {"1", "2"}) {
    const auto out = tmp / (std::string("out") + n);
    const auto r = test::run_command(cli() + " render-chat --thinking-mode thinking --messages '" +
                                     (vectors() / (std::string("test_input_") + n + ".json")).string() + "' > '" +
                                     out.string() + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(test::read_text_file(out), test::read_text_file(vectors() / (std::string("test_output_") + n + ".txt")))
        << n;
  }
  const auto bad = test::run_command(cli() + " render-chat --messages /nonexistent.json");
  EXPECT_NE(bad.exit_code, 0);
  const auto mode = test::run_command(cli() + " render-chat --thinking-mode sometimes --messages x");
  EXPECT_NE(mode.exit_code, 0);
}

TEST(TokenizerCli, ParseCompletionGivesTheMessageBack) {
  // The first assistant turn of official vector 1, from after its <think> through EOS.
  const std::string prompt = test::read_text_file(vectors() / "test_output_1.txt");
  const size_t a = prompt.find("<｜Assistant｜><think>") + std::string_view("<｜Assistant｜><think>").size();
  const size_t b = prompt.find("<｜end▁of▁sentence｜>", a) + std::string_view("<｜end▁of▁sentence｜>").size();
  test::TempDir tmp;
  test::write_text_file(tmp / "c.txt", prompt.substr(a, b - a));
  const auto r =
      test::run_command(cli() + " parse-completion --thinking-mode thinking < '" + (tmp / "c.txt").string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto msg = nlohmann::json::parse(r.output);
  const auto input = nlohmann::json::parse(test::read_text_file(vectors() / "test_input_1.json"));
  const auto& want = input["messages"][2];
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(msg["reasoning_content"], want["reasoning_content"]);
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(nlohmann::json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
            nlohmann::json::parse(want["tool_calls"][0]["function"]["arguments"].get<std::string>()));
}

TEST(TokenizerCli, TokenizeAndDetokenize) {
  const auto r =
      test::run_command(cli() + " tokenize --json --tokenizer " + tokenizer_json() +
                        " --text '<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output),
            nlohmann::json::parse("[128803, 30594, 128804, 128821, 36101, 128822, 7624, 1]"));
  const auto plain =
      test::run_command(cli() + " tokenize --no-special --tokenizer " + tokenizer_json() + " --text '<think>'");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("128821"), std::string::npos) << plain.output;
  const auto d = test::run_command(cli() + " detokenize --tokenizer " + tokenizer_json() +
                                   " --ids 128803,30594,128804,128821,36101,128822,7624,1");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(d.output, "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>");  // no added newline
  EXPECT_NE(test::run_command(cli() + " detokenize --tokenizer " + tokenizer_json() + " --ids 1,x").exit_code, 0);
  EXPECT_NE(test::run_command(cli() + " detokenize --tokenizer " + tokenizer_json() + " --ids 999999").exit_code, 0);
  EXPECT_NE(test::run_command(cli() + " tokenize --tokenizer /nonexistent --text hi").exit_code, 0);
}

}  // namespace
}  // namespace dsv4
