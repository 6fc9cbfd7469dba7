// tools: `dsv4 render-chat` — prints the exact V4 prompt for a chat request file (no added newline),
// for checking the renderer against DeepSeek's encoder test vectors.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "args.h"
#include "command.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_json.h"

namespace dsv4::cli {
namespace {

constexpr const char* kUsage =
    "usage: dsv4 render-chat --messages FILE.json [--thinking-mode thinking|chat] [--reasoning-effort E]\n"
    "                        [--tool-choice auto|none|required|NAME] [--no-generation-prompt]\n"
    "                        [--continue-final-message] [--keep-thinking]\n"
    "  FILE: a list of messages, or {\"messages\": [...], \"tools\": [...], \"response_format\": {...}}.\n"
    "  --thinking-mode defaults to thinking (the V4 default). --keep-thinking turns off drop_thinking.\n";

int run_render_chat(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"--messages", "--thinking-mode", "--reasoning-effort", "--tool-choice"},
                          {"--no-generation-prompt", "--continue-final-message", "--keep-thinking", "--help"});
  if (!args.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("render-chat", args.status());
  }
  if (args->has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const auto path = args->get("--messages");
  if (!path) {
    std::fputs(kUsage, stderr);
    return report_error("render-chat", invalid_argument("cli.usage", "--messages is required"));
  }
  ChatRenderOptions opts;
  const std::string mode = args->get_or("--thinking-mode", "thinking");
  if (mode == "thinking")
    opts.thinking = ThinkingMode::kThinking;
  else if (mode == "chat")
    opts.thinking = ThinkingMode::kChat;
  else
    return report_error("render-chat", invalid_argument("cli.bad_value", "--thinking-mode must be thinking or chat"));
  if (auto e = args->get("--reasoning-effort")) opts.reasoning_effort = *e;
  opts.tool_choice = args->get_or("--tool-choice", "auto");
  opts.add_generation_prompt = !args->has("--no-generation-prompt");
  opts.continue_final_message = args->has("--continue-final-message");
  opts.drop_thinking = !args->has("--keep-thinking");

  std::ifstream f(*path, std::ios::binary);
  if (!f) return report_error("render-chat", not_found("cli.file_not_found", "cannot open " + *path));
  std::stringstream ss;
  ss << f.rdbuf();
  auto req = parse_chat_request_json(ss.str());
  if (!req.is_ok()) return report_error("render-chat", req.status());
  opts.json_response_format = !req->response_format_json.empty();
  opts.response_format_json = req->response_format_json;
  auto prompt = render_chat(req->messages, req->tools, opts);
  if (!prompt.is_ok()) return report_error("render-chat", prompt.status());
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  return 0;
}

}  // namespace
DSV4_COMMAND("render-chat", "messages JSON -> the exact V4 prompt text", run_render_chat);
}  // namespace dsv4::cli
