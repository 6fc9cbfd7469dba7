// tools: `dsv4 parse-completion` — a completion's text (stdin) → an OpenAI assistant message (JSON).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "args.h"
#include "command.h"
#include "tokenizer/output_parser.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 parse-completion [--thinking-mode thinking|chat] [--finish-reason stop|length] < completion.txt\n"
    "  Prints {\"role\":\"assistant\",\"content\",\"reasoning_content\",\"tool_calls\"}; tool-call ids are\n"
    "  call_0, call_1, ... (the server assigns random ones). Thinking mode is the default.\n";

int run_parse_completion(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--thinking-mode", "--finish-reason"}, {"--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("parse-completion", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string mode = args->get_or("--thinking-mode", "thinking");
  if (mode != "thinking" && mode != "chat")
    return report_error("parse-completion",
                        invalid_argument("cli.bad_value", "--thinking-mode must be thinking or chat"));
  const std::string finish = args->get_or("--finish-reason", "stop");
  if (finish != "stop" && finish != "length")
    return report_error("parse-completion",
                        invalid_argument("cli.bad_value", "--finish-reason must be stop or length"));
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const ParsedCompletion p = parse_completion(text, mode == "thinking" ? ThinkingMode::kThinking : ThinkingMode::kChat,
                                              finish == "stop" ? CompletionEnd::kStop : CompletionEnd::kLength);
  nlohmann::ordered_json msg;
  msg["role"] = "assistant";
  if (p.content.empty() && !p.tool_calls.empty())
    msg["content"] = nullptr;
  else
    msg["content"] = p.content;
  if (!p.reasoning_content.empty()) msg["reasoning_content"] = p.reasoning_content;
  if (!p.tool_calls.empty()) {
    nlohmann::ordered_json calls = nlohmann::ordered_json::array();
    for (size_t i = 0; i < p.tool_calls.size(); ++i) {
      calls.push_back({{"id", "call_" + std::to_string(i)},
                       {"type", "function"},
                       {"function", {{"name", p.tool_calls[i].name}, {"arguments", p.tool_calls[i].arguments}}}});
    }
    msg["tool_calls"] = calls;
  }
  const std::string out = msg.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace
DSV4_COMMAND("parse-completion", "completion text (stdin) -> content, reasoning and tool calls as JSON",
             run_parse_completion);
}  // namespace dsv4::cli
