// fuzz: the V4 output parser. Byte 0 picks the thinking mode, byte 1 a split point; for the rest, the
// streaming parser fed in two pieces must equal the whole parse, and no DSML tag may reach content or
// reasoning.
#include <string>
#include <vector>

#include "core/check.h"
#include "fuzz_targets.h"
#include "tokenizer/output_parser.h"

namespace dsv4::fuzz {
namespace {

bool has_dsml(const std::string& s) {
  return s.find("｜DSML｜") != std::string::npos;
}

}  // namespace

int output_parser_entry(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto mode = (data[0] & 1) ? ThinkingMode::kThinking : ThinkingMode::kChat;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = data[1] % (text.size() + 1);
  // Whole parse with kLength, so it does no end-of-stream re-routing of reasoning.
  const ParsedCompletion whole = parse_completion(text, mode, CompletionEnd::kLength);
  StreamingOutputParser s(mode);
  std::string content, reasoning;
  std::vector<std::string> args;
  for (const auto& d : {s.push(text.substr(0, cut)), s.push(text.substr(cut)), s.finish()}) {
    content += d.content;
    reasoning += d.reasoning_content;
    for (const auto& call : d.tool_calls) {
      DSV4_CHECK(call.index >= 0);
      if (static_cast<size_t>(call.index) >= args.size()) args.resize(call.index + 1);
      args[call.index] += call.arguments;
    }
  }
  // DSML in the input can only come back inside a parameter value; content and reasoning never carry it.
  DSV4_CHECK(!has_dsml(content) && !has_dsml(reasoning));
  DSV4_CHECK(content == whole.content, "streamed content differs from the whole parse");
  DSV4_CHECK(reasoning == whole.reasoning_content, "streamed reasoning differs from the whole parse");
  // The whole parse keeps the completed calls; the stream may also have started the last one, which
  // finish() then reports as truncated.
  const int started = s.tool_calls_started(), completed = s.tool_calls_completed();
  DSV4_CHECK(static_cast<int>(args.size()) <= started && static_cast<size_t>(completed) == whole.tool_calls.size());
  DSV4_CHECK(started - completed <= 1 && s.truncated_tool_call() == (started != completed));
  for (size_t i = 0; i < whole.tool_calls.size(); ++i)
    DSV4_CHECK(i < args.size() && args[i] == whole.tool_calls[i].arguments, "streamed arguments differ");
  return 0;
}

}  // namespace dsv4::fuzz
