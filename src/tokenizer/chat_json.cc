// tokenizer: encoder-test-vector JSON → ChatRequest (see chat_json.h).
#include "tokenizer/chat_json.h"

#include "tokenizer/py_json.h"

namespace dsv4 {
namespace {

using tok::JsonValue;

Status bad(const std::string& what) {
  return invalid_argument("chat.bad_request", what);
}

Result<std::optional<std::string>> text_content(const JsonValue* v, const std::string& where) {
  if (v == nullptr || v->kind == JsonValue::Kind::kNull) return std::optional<std::string>();
  if (v->is_string()) return std::optional<std::string>(v->string);
  if (v->is_array()) {
    std::string joined;
    bool first = true;
    for (const JsonValue& part : v->items) {
      const JsonValue* text = part.is_object() ? part.find("text") : nullptr;
      if (text == nullptr || !text->is_string()) return bad(where + ": a content part has no text");
      if (!first) joined += "\n\n";
      joined += text->string;
      first = false;
    }
    return std::optional<std::string>(joined);
  }
  return bad(where + " is not a string, null or an array of text parts");
}

Result<ToolDefinition> parse_tool(const JsonValue& t) {
  const JsonValue* fn = t.find("function");
  if (fn == nullptr) fn = &t;  // a bare function object
  if (!fn->is_object()) return bad("a tool's function is not an object");
  ToolDefinition def;
  const JsonValue* name = fn->find("name");
  if (name == nullptr || !name->is_string()) return bad("a tool has no name");
  def.name = name->string;
  if (const JsonValue* d = fn->find("description"); d && d->is_string()) def.description = d->string;
  if (const JsonValue* p = fn->find("parameters")) def.parameters_json = tok::py_json_dumps(*p);
  def.function_json = tok::py_json_dumps(*fn);  // keeps the client's key order and extra keys
  return def;
}

Status parse_tools(const JsonValue& list, std::vector<ToolDefinition>& out) {
  if (!list.is_array()) return bad("tools is not an array");
  for (const JsonValue& t : list.items) {
    if (!t.is_object()) return bad("a tool is not an object");
    DSV4_ASSIGN_OR_RETURN(ToolDefinition def, parse_tool(t));
    out.push_back(std::move(def));
  }
  return Status::ok();
}

Result<ChatMessage> parse_message(const JsonValue& m, size_t index, ChatRequest& req) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) return bad(where + " is not an object");
  ChatMessage msg;
  const JsonValue* role = m.find("role");
  if (role == nullptr || !role->is_string()) return bad(where + " has no role");
  msg.role = role->string;
  DSV4_ASSIGN_OR_RETURN(msg.content, text_content(m.find("content"), where + ".content"));
  const JsonValue* reasoning = m.find("reasoning_content");
  if (reasoning == nullptr) reasoning = m.find("reasoning");
  DSV4_ASSIGN_OR_RETURN(msg.reasoning_content, text_content(reasoning, where + ".reasoning_content"));
  if (const JsonValue* id = m.find("tool_call_id"); id && id->is_string()) msg.tool_call_id = id->string;
  if (const JsonValue* name = m.find("name"); name && name->is_string()) msg.name = name->string;
  if (const JsonValue* calls = m.find("tool_calls"); calls && calls->kind != JsonValue::Kind::kNull) {
    if (!calls->is_array()) return bad(where + ".tool_calls is not an array");
    for (const JsonValue& c : calls->items) {
      const JsonValue* fn = c.is_object() ? c.find("function") : nullptr;
      if (fn == nullptr || !fn->is_object()) return bad(where + ": a tool call has no function object");
      ToolCall call;
      if (const JsonValue* id = c.find("id"); id && id->is_string()) call.id = id->string;
      const JsonValue* name = fn->find("name");
      if (name == nullptr || !name->is_string()) return bad(where + ": a tool call has no name");
      call.name = name->string;
      if (const JsonValue* args = fn->find("arguments")) {
        call.arguments = args->is_string() ? args->string : tok::py_json_dumps(*args);
      }
      msg.tool_calls.push_back(std::move(call));
    }
  }
  // The encoder's own format puts tools / response_format on the system message.
  if (msg.role == "system") {
    if (const JsonValue* tools = m.find("tools")) DSV4_RETURN_IF_ERROR(parse_tools(*tools, req.tools));
    if (const JsonValue* rf = m.find("response_format"); rf && rf->kind != JsonValue::Kind::kNull)
      req.response_format_json = tok::py_json_dumps(*rf);
  }
  return msg;
}

}  // namespace

Result<ChatRequest> parse_chat_request_json(std::string_view json_text) {
  auto doc = tok::parse_json(json_text);
  if (!doc.is_ok()) return invalid_argument("chat.bad_json", "chat request: " + doc.status().message());
  ChatRequest req;
  const JsonValue* messages = &*doc;
  if (doc->is_object()) {
    messages = doc->find("messages");
    if (messages == nullptr) return bad("no \"messages\"");
    if (const JsonValue* tools = doc->find("tools"); tools && tools->kind != JsonValue::Kind::kNull)
      DSV4_RETURN_IF_ERROR(parse_tools(*tools, req.tools));
    if (const JsonValue* rf = doc->find("response_format"); rf && rf->kind != JsonValue::Kind::kNull)
      req.response_format_json = tok::py_json_dumps(*rf);
  }
  if (!messages->is_array()) return bad("messages is not an array");
  for (size_t i = 0; i < messages->items.size(); ++i) {
    DSV4_ASSIGN_OR_RETURN(ChatMessage msg, parse_message(messages->items[i], i, req));
    req.messages.push_back(std::move(msg));
  }
  return req;
}

}  // namespace dsv4
