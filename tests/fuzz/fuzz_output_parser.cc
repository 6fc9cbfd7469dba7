// fuzz: the V4 output parser. For any text and any two-way split, streaming must equal the whole
// parse, and no DSML tag may reach content, reasoning or arguments.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tokenizer/output_parser.h"

static bool has_dsml(const std::string& s) {
  return s.find("｜DSML｜") != std::string::npos;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const auto mode = (data[0] & 1) ? dsv4::ThinkingMode::kThinking : dsv4::ThinkingMode::kChat;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = text.empty() ? 0 : data[1] % (text.size() + 1);
  // Whole parse with kLength so it does no end-of-stream re-routing of reasoning.
  const dsv4::ParsedCompletion whole = dsv4::parse_completion(text, mode, dsv4::CompletionEnd::kLength);
  dsv4::StreamingOutputParser s(mode);
  std::string content, reasoning;
  std::vector<std::string> args;
  for (const auto& d : {s.push(text.substr(0, cut)), s.push(text.substr(cut)), s.finish()}) {
    content += d.content;
    reasoning += d.reasoning_content;
    for (const auto& t : d.tool_calls) {
      if (static_cast<size_t>(t.index) >= args.size()) args.resize(t.index + 1);
      args[t.index] += t.arguments;
    }
  }
  // DSML in the input text itself can only come back if the model wrote the marker inside a
  // parameter value; content and reasoning never carry it.
  if (has_dsml(content) || has_dsml(reasoning)) __builtin_trap();
  if (content != whole.content || reasoning != whole.reasoning_content) __builtin_trap();
  for (size_t i = 0; i < whole.tool_calls.size(); ++i)
    if (i >= args.size() || args[i] != whole.tool_calls[i].arguments) __builtin_trap();
  return 0;
}
