// unit: V4 output parsing (spec chat-format §3): the spec's worked example, and the streaming
// parser fed at every split point and token by token must give exactly the whole-text result while
// never letting DSML or a partial tag into content, reasoning or arguments.
#include "tokenizer/output_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "tokenizer/stream_decoder.h"

namespace dsv4 {
namespace {

// spec §3.1: the first assistant turn of example C, from after <think> through EOS.
const std::string kExampleC =
    "Need two calls.</think>Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
    "<｜DSML｜parameter name=\"city\" string=\"true\">Paris</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
    "<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">Rome</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"days\" string=\"false\">2</｜DSML｜parameter>\n"
    "<｜DSML｜parameter name=\"opts\" string=\"false\">{\"unit\": \"C\", \"x\": [1, 2.5, true, "
    "null]}</｜DSML｜parameter>\n"
    "</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>";

TEST(OutputParser, SpecExampleC) {
  const ParsedCompletion p = parse_completion(kExampleC, ThinkingMode::kThinking);
  EXPECT_EQ(p.reasoning_content, "Need two calls.");
  EXPECT_EQ(p.content, "Checking.");
  ASSERT_EQ(p.tool_calls.size(), 2u);
  EXPECT_EQ(p.tool_calls[0].name, "get_weather");
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"city": "Paris", "days": 2})");
  EXPECT_EQ(p.tool_calls[1].arguments,
            R"({"city": "Rome", "days": 2, "opts": {"unit": "C", "x": [1, 2.5, true, null]}})");
  EXPECT_TRUE(p.tool_calls[0].id.empty());
}

TEST(OutputParser, GrammarCorners) {
  // A no-parameter invoke gives {} (spec §3.1).
  auto p = parse_completion(
      "</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      ThinkingMode::kThinking);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, "{}");
  // String values are JSON-escaped, multi-line and untrimmed; an invalid string=false value falls
  // back to a JSON string.
  p = parse_completion(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"w\">\n<｜DSML｜parameter name=\"s\" string=\"true\"> a \"b\"\n\\c "
      "</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"n\" string=\"false\">[1, "
      "oops</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      ThinkingMode::kChat);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  const auto args = nlohmann::json::parse(p.tool_calls[0].arguments);
  EXPECT_EQ(args["s"], " a \"b\"\n\\c ");
  EXPECT_EQ(args["n"], "[1, oops");
  // SGLang's variant: an invoke body that is a single JSON object.
  p = parse_completion(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n{\"x\": 1}\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      ThinkingMode::kChat);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, "{\"x\": 1}");
  // Tools called before </think> end the reasoning (vllm-ascend PR#14511).
  p = parse_completion(
      "hmm\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      ThinkingMode::kThinking);
  EXPECT_EQ(p.reasoning_content, "hmm");
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.tool_calls.size(), 1u);
  // Chat mode ignores a stray </think>; EOS ends everything.
  p = parse_completion("a</think>b<｜end▁of▁sentence｜>ignored", ThinkingMode::kChat);
  EXPECT_EQ(p.content, "ab");
  // A held "2 <" is flushed at the end (vllm PR#41241).
  p = parse_completion("x = 2 <", ThinkingMode::kChat);
  EXPECT_EQ(p.content, "x = 2 <");
}

TEST(OutputParser, StrayDsmlNeverReachesText) {
  // A stray close tag and a bare marker are removed; an invoke without its wrapper still parses.
  auto p = parse_completion("a</｜DSML｜tool_calls>b ｜DSML｜ c<｜DSML｜toolcall>d", ThinkingMode::kChat);
  EXPECT_EQ(p.content, "ab  cd");
  p = parse_completion(
      "ok\n\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" "
      "string=\"true\">1</｜DSML｜parameter>\n</｜DSML｜invoke>",
      ThinkingMode::kChat);
  EXPECT_EQ(p.content, "ok");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"x": "1"})");
  // A value whose close tag is missing ends at the invoke close: no DSML inside arguments.
  p = parse_completion(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" "
      "string=\"true\">v\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>",
      ThinkingMode::kChat);
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].arguments, R"({"x": "v\n"})");
}

TEST(OutputParser, ReasoningWithoutThinkEnd) {
  // No </think> and a normal stop: the text is the answer (vllm#48645); cut by length: reasoning.
  auto p = parse_completion("just an answer<｜end▁of▁sentence｜>", ThinkingMode::kThinking);
  EXPECT_EQ(p.content, "just an answer");
  EXPECT_EQ(p.reasoning_content, "");
  p = parse_completion("still thinking", ThinkingMode::kThinking, CompletionEnd::kLength);
  EXPECT_EQ(p.reasoning_content, "still thinking");
  EXPECT_EQ(p.content, "");
}

TEST(OutputParser, TruncatedInvokeIsDiscarded) {
  const std::string text =
      "</think>ok\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n</｜DSML｜invoke>\n"
      "<｜DSML｜invoke name=\"b\">\n<｜DSML｜parameter name=\"x\" string=\"true\">par";
  const auto p = parse_completion(text, ThinkingMode::kThinking);
  EXPECT_EQ(p.content, "ok");
  ASSERT_EQ(p.tool_calls.size(), 1u);
  EXPECT_EQ(p.tool_calls[0].name, "a");
  StreamingOutputParser s(ThinkingMode::kThinking);
  (void)s.push(text);
  (void)s.finish();
  EXPECT_TRUE(s.truncated_tool_call());
  EXPECT_EQ(s.tool_calls_completed(), 1);
}

TEST(OutputParser, EosInsideInvokeIsReportedTruncated) {
  // Found by the output_parser fuzzer: EOS before </｜DSML｜invoke> left the started call unreported.
  const std::string text =
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n<｜DSML｜parameter name=\"x\" string=\"true\">v"
      "<｜end▁of▁sentence｜>";
  StreamingOutputParser s(ThinkingMode::kChat);
  const auto d = s.push(text);
  (void)s.finish();
  ASSERT_EQ(d.tool_calls.size(), 1u);  // the call's name and first argument bytes were streamed
  EXPECT_EQ(s.tool_calls_started(), 1);
  EXPECT_EQ(s.tool_calls_completed(), 0);
  EXPECT_TRUE(s.truncated_tool_call());
  EXPECT_TRUE(parse_completion(text, ThinkingMode::kChat).tool_calls.empty());
}

TEST(OutputParser, StrayDsmlTagSplitAcrossChunksLeavesNoBracket) {
  // Found by the output_parser fuzzer: a chunk ending in "</｜DS" sent "</" before the stray tag
  // was recognised, so streaming differed from the whole parse.
  const std::string text = "a</｜DSML｜tool_calls>b";
  EXPECT_EQ(parse_completion(text, ThinkingMode::kChat).content, "ab");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StreamingOutputParser s(ThinkingMode::kChat);
    std::string content = s.push(text.substr(0, cut)).content;
    content += s.push(text.substr(cut)).content;
    content += s.finish().content;
    EXPECT_EQ(content, "ab") << "cut " << cut;
  }
}

TEST(OutputParser, InvokeTagSplitInsideItsNameStartsTheCall) {
  // Found by the output_parser fuzzer: a chunk ending in "<｜DSML｜invoke nam" was taken for a stray
  // tag (its ｜DSML｜ matched first) and " nam" + the rest leaked into content.
  const std::string text =
      "ok<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"x\" string=\"true\">1</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>";
  const auto whole = parse_completion(text, ThinkingMode::kChat);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.content, "ok");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StreamingOutputParser s(ThinkingMode::kChat);
    const auto a = s.push(text.substr(0, cut)), b = s.push(text.substr(cut)), c = s.finish();
    EXPECT_EQ(a.content + b.content + c.content, "ok") << "cut " << cut;
    EXPECT_EQ(s.tool_calls_completed(), 1) << "cut " << cut;
  }
}

TEST(OutputParser, DroppingAStrayTagNeverSplicesANewMarker) {
  // Found by the output_parser fuzzer: removing "<｜DSML｜x" from "<｜DSML<｜DSML｜x｜y>" joined
  // "<｜DSML" and "｜y>" into a new ｜DSML｜ in the content.
  for (const std::string text : {"a<｜DSML<｜DSML｜x｜y>b", "a｜DS<｜DSML｜tool_calls>ML｜q>b"}) {
    const auto whole = parse_completion(text, ThinkingMode::kChat);
    EXPECT_EQ(whole.content.find("｜DSML｜"), std::string::npos) << whole.content;
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      StreamingOutputParser s(ThinkingMode::kChat);
      std::string content = s.push(text.substr(0, cut)).content;
      content += s.push(text.substr(cut)).content;
      content += s.finish().content;
      EXPECT_EQ(content, whole.content) << "cut " << cut;
    }
  }
}

TEST(OutputParser, BraceAfterSkippedJunkIsNotAJsonBody) {
  // Found by the output_parser fuzzer: junk in an invoke body was dropped up to the chunk's end, and a
  // '{' starting the next chunk was then taken for SGLang's JSON-body form.
  const std::string text =
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"w\">\njunk {{{\n<｜DSML｜parameter name=\"f\" "
      "string=\"true\">s</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const auto whole = parse_completion(text, ThinkingMode::kChat);
  ASSERT_EQ(whole.tool_calls.size(), 1u);
  EXPECT_EQ(whole.tool_calls[0].arguments, R"({"f": "s"})");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StreamingOutputParser s(ThinkingMode::kChat);
    std::string args;
    for (const auto& d : {s.push(text.substr(0, cut)), s.push(text.substr(cut)), s.finish()})
      for (const auto& t : d.tool_calls) args += t.arguments;
    EXPECT_EQ(args, whole.tool_calls[0].arguments) << "cut " << cut;
  }
}

bool has_dsml_residue(const std::string& s) {
  // The cases below use "<｜" and "<thi" as plain text on purpose; whole tags must never appear.
  return s.find("｜DSML｜") != std::string::npos || s.find("<｜end") != std::string::npos ||
         s.find("think>") != std::string::npos;
}

struct Collected {
  std::string content, reasoning;
  std::vector<std::string> names, args;
};

void absorb(Collected& c, const StreamingOutputParser::Delta& d) {
  c.content += d.content;
  c.reasoning += d.reasoning_content;
  for (const auto& t : d.tool_calls) {
    if (static_cast<size_t>(t.index) >= c.names.size()) {
      ASSERT_EQ(static_cast<size_t>(t.index), c.names.size()) << "call indices must appear in order";
      ASSERT_FALSE(t.name.empty()) << "a call's first delta carries its name";
      c.names.push_back(t.name);
      c.args.emplace_back();
    } else {
      EXPECT_TRUE(t.name.empty());
    }
    EXPECT_FALSE(has_dsml_residue(t.arguments)) << t.arguments;
    c.args[t.index] += t.arguments;
  }
  EXPECT_FALSE(has_dsml_residue(d.content)) << d.content;
  EXPECT_FALSE(has_dsml_residue(d.reasoning_content)) << d.reasoning_content;
}

void expect_same(const Collected& c, const ParsedCompletion& whole, const std::string& where) {
  EXPECT_EQ(c.content, whole.content) << where;
  EXPECT_EQ(c.reasoning, whole.reasoning_content) << where;
  ASSERT_EQ(c.names.size(), whole.tool_calls.size()) << where;
  for (size_t i = 0; i < c.names.size(); ++i) {
    EXPECT_EQ(c.names[i], whole.tool_calls[i].name) << where;
    EXPECT_EQ(c.args[i], whole.tool_calls[i].arguments) << where;
  }
}

const std::vector<std::string>& streaming_cases() {
  static const std::vector<std::string> cases = {
      kExampleC,
      "Done.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"run\">\n<｜DSML｜parameter name=\"cmd\" "
      "string=\"true\">echo 2>&1 </x></｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"o\" string=\"false\">{\"a\": {\"b\": "
      "[1]}}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls><｜end▁of▁sentence｜>",
      "a < b and c <| d </think> x << y <｜ z\n\n\nend\n\n",
      "reason <thi</think>answer with trailing newlines\n\n",
  };
  return cases;
}

TEST(StreamingOutputParser, EverySplitPointMatchesWholeParse) {
  for (const std::string& text : streaming_cases()) {
    const ParsedCompletion whole = parse_completion(text, ThinkingMode::kThinking);
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      StreamingOutputParser s(ThinkingMode::kThinking);
      Collected c;
      absorb(c, s.push(std::string_view(text).substr(0, cut)));
      absorb(c, s.push(std::string_view(text).substr(cut)));
      absorb(c, s.finish());
      expect_same(c, whole, "cut at " + std::to_string(cut));
      if (HasFailure()) return;
    }
  }
}

TEST(StreamingOutputParser, ByteByByteAndTokenByTokenMatchWholeParse) {
  auto tok = Tokenizer::load(test::shared_dir() / "tokenizer" / "tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  for (const std::string& text : streaming_cases()) {
    const ParsedCompletion whole = parse_completion(text, ThinkingMode::kThinking);
    {
      StreamingOutputParser s(ThinkingMode::kThinking);
      Collected c;
      for (const char ch : text) absorb(c, s.push(std::string_view(&ch, 1)));
      absorb(c, s.finish());
      expect_same(c, whole, "byte by byte");
    }
    {
      // The real path: model ids → StreamDecoder → parser (BPE fuses `}</`, `">\n`, `.\n\n`).
      StreamingOutputParser s(ThinkingMode::kThinking);
      StreamDecoder sd(*tok);
      Collected c;
      for (const int32_t id : tok->encode(text)) absorb(c, s.push(sd.push(id)));
      absorb(c, s.push(sd.flush()));
      absorb(c, s.finish());
      expect_same(c, whole, "token by token");
    }
  }
}

TEST(StreamingOutputParser, StringArgumentsStreamBeforeTheParameterCloses) {
  StreamingOutputParser s(ThinkingMode::kChat);
  auto d = s.push(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"write\">\n<｜DSML｜parameter name=\"text\" string=\"true\">hello "
      "wor");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "write");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"text\": \"hello wor");
  d = s.push("ld</｜DSML｜para");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "ld");  // the partial close tag is held back
  d = s.push("meter>\n</｜DSML｜invoke>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments, "\"}");
  EXPECT_EQ(s.tool_calls_completed(), 1);
}

}  // namespace
}  // namespace dsv4
