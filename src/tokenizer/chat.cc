// tokenizer: V4 prompt rendering (spec chat-format §2): attach tools, merge tool results into user
// turns and sort them, drop old reasoning, then render each turn with the reference's exact bytes.
#include "tokenizer/chat.h"

#include <algorithm>

#include "tokenizer/py_json.h"

namespace dsv4 {
namespace {

using namespace chat_tokens;
using tok::JsonValue;

constexpr std::string_view kToolsBlockHead =
    "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by writing "
    "a "
    "\"<｜DSML｜tool_calls>\" block like the following:\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
    "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n...\n"
    "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"$TOOL_NAME2\">\n...\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, booleans, "
    "arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled "
    "(triggered by <think>), you MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls "
    "or "
    "final response.\n\nOtherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
constexpr std::string_view kToolsBlockTail =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";

// spec §2.4 example D: the original release's preamble for reasoning_effort = "max".
constexpr std::string_view kEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough in your thinking and "
    "comprehensively decompose the problem to resolve the root cause, rigorously stress-testing your logic against all "
    "potential paths, edge cases, and adversarial scenarios.\nExplicitly write out your entire deliberation process, "
    "documenting every intermediate step, considered alternative, and rejected hypothesis to ensure absolutely no "
    "assumption is left unchecked.\n\n";

constexpr std::string_view kResponseFormatHead =
    "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

enum class TurnKind { kSystem, kUser, kAssistant };

struct Block {
  std::string text;  // the message content (a tool result's wrapper tags are added when rendering)
  bool is_tool_result = false;
  std::string tool_call_id;
};

struct Turn {
  TurnKind kind;
  std::string content;                   // system / assistant
  std::vector<Block> blocks;             // user: merged user texts and tool results
  std::optional<std::string> reasoning;  // assistant
  std::vector<ToolCall> tool_calls;      // assistant
  bool has_tools = false;                // system
  bool has_response_format = false;      // system
};

Result<std::string> py_dump_json_text(std::string_view text, const std::string& what) {
  auto v = tok::parse_json(text);
  if (!v.is_ok()) return invalid_argument("chat.bad_json", what + " is not valid JSON: " + v.status().message());
  return tok::py_json_dumps(*v);
}

Result<std::string> tool_schema(const ToolDefinition& t) {
  if (!t.function_json.empty()) return py_dump_json_text(t.function_json, "tool " + t.name + " function");
  // {"name", "description", "parameters"}: OpenAI's field order for a function object.
  std::string out = "{\"name\": " + tok::py_json_quote(t.name);
  if (!t.description.empty()) out += ", \"description\": " + tok::py_json_quote(t.description);
  if (!t.parameters_json.empty()) {
    DSV4_ASSIGN_OR_RETURN(const std::string params,
                          py_dump_json_text(t.parameters_json, "tool " + t.name + " parameters"));
    out += ", \"parameters\": " + params;
  }
  out += "}";
  return out;
}

// The prompt being rendered, recording which bytes the template itself writes (tmpl) and which come
// from the request (text): only the former may be read as special tokens (see encode_chat).
class PromptBuilder {
 public:
  void tmpl(std::string_view s) {
    if (s.empty()) return;
    if (!spans_.empty() && spans_.back().end == out_.size())
      spans_.back().end += s.size();
    else
      spans_.push_back({out_.size(), out_.size() + s.size()});
    out_ += s;
  }
  void text(std::string_view s) { out_ += s; }
  RenderedPrompt take() { return {std::move(out_), std::move(spans_)}; }

 private:
  std::string out_;
  std::vector<TextSpan> spans_;
};

// spec §2.3: one DSML parameter per argument key, strings raw, everything else as Python JSON.
void render_invoke(const ToolCall& call, PromptBuilder& out) {
  out.tmpl("<｜DSML｜invoke name=\"");
  out.text(call.name);
  out.tmpl("\">\n");
  bool first = true;
  auto param = [&](std::string_view key, bool is_string, std::string_view value) {
    if (!first) out.tmpl("\n");
    first = false;
    out.tmpl("<｜DSML｜parameter name=\"");
    out.text(key);
    out.tmpl(is_string ? "\" string=\"true\">" : "\" string=\"false\">");
    out.text(value);
    out.tmpl("</｜DSML｜parameter>");
  };
  const bool blank = call.arguments.find_first_not_of(" \t\r\n") == std::string::npos;
  if (!blank) {
    auto args = tok::parse_json(call.arguments);
    if (args.is_ok() && args->is_object()) {
      for (const auto& [k, v] : args->fields) {
        if (v.is_string())
          param(k, true, v.string);
        else
          param(k, false, tok::py_json_dumps(v));
      }
    } else {
      // The reference's fallback for arguments that are not a JSON object: one raw string param.
      param("arguments", true, call.arguments);
    }
  }
  out.tmpl("\n</｜DSML｜invoke>");
}

void render_tool_calls(const std::vector<ToolCall>& calls, PromptBuilder& out) {
  out.tmpl("\n\n<｜DSML｜tool_calls>\n");
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) out.tmpl("\n");
    render_invoke(calls[i], out);
  }
  out.tmpl("\n</｜DSML｜tool_calls>");
}

// Tool results go in the order of the preceding assistant's tool_calls (spec §2.2 step 2); results
// with an unknown id keep their relative order after the known ones. User texts keep their slots.
void sort_tool_results(std::vector<Block>& blocks, const std::vector<ToolCall>* calls) {
  if (calls == nullptr) return;
  auto rank = [&](const Block& b) {
    for (size_t i = 0; i < calls->size(); ++i)
      if ((*calls)[i].id == b.tool_call_id) return i;
    return calls->size();
  };
  std::vector<size_t> slots;
  std::vector<Block> results;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].is_tool_result) {
      slots.push_back(i);
      results.push_back(blocks[i]);
    }
  }
  std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) { return rank(a) < rank(b); });
  for (size_t k = 0; k < slots.size(); ++k) blocks[slots[k]] = std::move(results[k]);
}

}  // namespace

Result<RenderedPrompt> render_chat_spans(std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools,
                                         const ChatRenderOptions& options) {
  bool thinking = options.thinking == ThinkingMode::kThinking;
  std::string_view effort_prefix;
  if (options.reasoning_effort) {
    const std::string& e = *options.reasoning_effort;
    if (e == "none")
      thinking = false;
    else if (e == "max")
      effort_prefix = kEffortMax;
    else if (e != "minimal" && e != "low" && e != "medium" && e != "high" && e != "xhigh")
      return invalid_argument(
          "chat.bad_reasoning_effort",
          "reasoning_effort \"" + e + "\" is not one of none, minimal, low, medium, high, xhigh, max");
  }
  if (!thinking) effort_prefix = {};

  // 1. Turns: roles checked, developer → system, user and tool messages merged (spec §2.2 step 1).
  std::vector<Turn> turns;
  const std::vector<ToolCall>* last_calls = nullptr;     // the assistant tool_calls a tool run answers
  std::vector<const std::vector<ToolCall>*> turn_calls;  // per user turn: the calls its results answer
  for (const ChatMessage& msg : messages) {
    const std::string content = msg.content.value_or("");
    if (msg.role == "system" || msg.role == "developer") {
      turns.push_back({TurnKind::kSystem, content, {}, std::nullopt, {}, false, false});
      turn_calls.push_back(nullptr);
    } else if (msg.role == "user" || msg.role == "tool") {
      Block b;
      if (msg.role == "tool") {
        b.text = content;
        b.is_tool_result = true;
        b.tool_call_id = msg.tool_call_id.value_or("");
      } else {
        b.text = content;
      }
      if (turns.empty() || turns.back().kind != TurnKind::kUser) {
        turns.push_back({TurnKind::kUser, "", {}, std::nullopt, {}, false, false});
        turn_calls.push_back(last_calls);
      }
      turns.back().blocks.push_back(std::move(b));
    } else if (msg.role == "assistant") {
      turns.push_back({TurnKind::kAssistant, content, {}, msg.reasoning_content, msg.tool_calls, false, false});
      turn_calls.push_back(nullptr);
      last_calls = &msg.tool_calls;  // `messages` outlives this function; `turns` may reallocate
    } else {
      return invalid_argument("chat.unknown_role",
                              "message role \"" + msg.role + "\" is not system, user, assistant, tool or developer");
    }
  }
  for (size_t i = 0; i < turns.size(); ++i)
    if (turns[i].kind == TurnKind::kUser) sort_tool_results(turns[i].blocks, turn_calls[i]);

  // 2. Tools and response_format ride on the first message if it is system, else on an inserted
  // empty system message (spec §2.1). tool_choice "none" renders no tools.
  const bool render_tools = !tools.empty() && options.tool_choice != "none";
  if (render_tools || options.json_response_format) {
    if (turns.empty() || turns.front().kind != TurnKind::kSystem)
      turns.insert(turns.begin(), Turn{TurnKind::kSystem, "", {}, std::nullopt, {}, false, false});
    turns.front().has_tools = render_tools;
    turns.front().has_response_format = options.json_response_format;
  }

  // 3. Reasoning dropping (spec §2.2 step 3): thinking mode, no tools anywhere.
  const bool drop = thinking && options.drop_thinking && !render_tools;
  std::ptrdiff_t last_user = -1;
  for (size_t i = 0; i < turns.size(); ++i)
    if (turns[i].kind == TurnKind::kUser) last_user = static_cast<std::ptrdiff_t>(i);

  // 4. Render (spec §2.3).
  PromptBuilder out;
  out.tmpl(kBos);
  out.tmpl(effort_prefix);
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    const auto idx = static_cast<std::ptrdiff_t>(i);
    switch (t.kind) {
      case TurnKind::kSystem:
        out.text(t.content);
        if (t.has_tools) {
          out.tmpl("\n\n");
          out.tmpl(kToolsBlockHead);
          for (size_t k = 0; k < tools.size(); ++k) {
            if (k) out.tmpl("\n");
            DSV4_ASSIGN_OR_RETURN(const std::string schema, tool_schema(tools[k]));
            out.text(schema);
          }
          out.tmpl(kToolsBlockTail);
        }
        if (t.has_response_format) {
          out.tmpl(kResponseFormatHead);
          if (options.response_format_json.empty()) {
            out.tmpl("{\"type\": \"json_object\"}");
          } else {
            DSV4_ASSIGN_OR_RETURN(const std::string rf,
                                  py_dump_json_text(options.response_format_json, "response_format"));
            out.text(rf);
          }
        }
        break;
      case TurnKind::kUser: {
        out.tmpl(kUser);
        for (size_t k = 0; k < t.blocks.size(); ++k) {
          if (k) out.tmpl("\n\n");
          if (t.blocks[k].is_tool_result) out.tmpl("<tool_result>");
          out.text(t.blocks[k].text);
          if (t.blocks[k].is_tool_result) out.tmpl("</tool_result>");
        }
        const bool last = i + 1 == turns.size();
        const bool next_is_assistant = !last && turns[i + 1].kind == TurnKind::kAssistant;
        if (next_is_assistant || (last && options.add_generation_prompt)) {
          out.tmpl(kAssistant);
          out.tmpl((thinking && (!drop || idx == last_user)) ? kThinkStart : kThinkEnd);
        }
        break;
      }
      case TurnKind::kAssistant: {
        if (thinking && (!drop || idx > last_user)) {
          out.text(t.reasoning.value_or(""));
          out.tmpl(kThinkEnd);
        }
        out.text(t.content);
        if (!t.tool_calls.empty()) render_tool_calls(t.tool_calls, out);
        if (!(options.continue_final_message && i + 1 == turns.size())) out.tmpl(kEos);
        break;
      }
    }
  }
  return out.take();
}

Result<std::string> render_chat(std::span<const ChatMessage> messages, std::span<const ToolDefinition> tools,
                                const ChatRenderOptions& options) {
  DSV4_ASSIGN_OR_RETURN(RenderedPrompt p, render_chat_spans(messages, tools, options));
  return std::move(p.text);
}

Result<std::vector<int32_t>> encode_chat(const Tokenizer& tokenizer, std::span<const ChatMessage> messages,
                                         std::span<const ToolDefinition> tools, const ChatRenderOptions& options) {
  DSV4_ASSIGN_OR_RETURN(const RenderedPrompt p, render_chat_spans(messages, tools, options));
  return tokenizer.encode_with_special_spans(p.text, p.template_spans);
}

}  // namespace dsv4
