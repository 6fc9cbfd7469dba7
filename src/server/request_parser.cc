// server: OpenAI request validation. Strict on types (a string where a number belongs is a 400, never a
// coercion), explicit about what this server does not support (400 "unsupported_parameter" rather than
// silently ignoring a field that changes the answer), lenient only on unknown informational fields.
#include "server/request_parser.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_depth.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

std::string type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_string()) return "string";
  if (v.is_array()) return "array";
  return "object";
}

ApiError wrong_type(const std::string& param, const char* expected, const Json& got) {
  return bad_request("invalid_type", "'" + param + "' must be " + expected + ", got " + type_name(got), param);
}

ApiError out_of_range(const std::string& param, const std::string& rule) {
  return bad_request("invalid_value", "'" + param + "' " + rule, param);
}

// Reads optional fields of one JSON object; every getter returns an error for a wrong type or range.
// A JSON null is treated as "absent", as the OpenAI API does.
class ObjectReader {
 public:
  ObjectReader(const Json& obj, std::string prefix) : obj_(obj), prefix_(std::move(prefix)) {}

  std::string path(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  const Json* find(const char* key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  std::optional<ApiError> get_bool(const char* key, bool* out) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) return wrong_type(path(key), "a boolean", *v);
    *out = v->get<bool>();
    return std::nullopt;
  }

  std::optional<ApiError> get_string(const char* key, std::optional<std::string>* out) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) return wrong_type(path(key), "a string", *v);
    *out = v->get<std::string>();
    return std::nullopt;
  }

  // An integer in [lo, hi]; floats (even 3.0) are refused, as are negatives when lo >= 0.
  std::optional<ApiError> get_int(const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(hi)) return out_of_range(path(key), "must be at most " + std::to_string(hi));
      if (lo > 0 && u < static_cast<uint64_t>(lo)) return out_of_range(path(key), "must be at least " + std::to_string(lo));
      *out = static_cast<int64_t>(u);
      return std::nullopt;
    }
    if (!v->is_number_integer()) return wrong_type(path(key), "an integer", *v);
    const int64_t i = v->get<int64_t>();
    if (i < lo) return out_of_range(path(key), "must be at least " + std::to_string(lo));
    if (i > hi) return out_of_range(path(key), "must be at most " + std::to_string(hi));
    *out = i;
    return std::nullopt;
  }

  // A finite number in [lo, hi] (integers accepted).
  std::optional<ApiError> get_float(const char* key, double lo, double hi, float* out) const {
    const Json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_number()) return wrong_type(path(key), "a number", *v);
    const double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      return out_of_range(path(key), "must be between " + fmt(lo) + " and " + fmt(hi));
    }
    *out = static_cast<float>(d);
    return std::nullopt;
  }

 private:
  static std::string fmt(double d) {
    std::string s = std::to_string(d);
    while (s.size() > 1 && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const Json& obj_;
  std::string prefix_;
};

#define DSV4_TRY(expr)                    \
  do {                                    \
    if (auto dsv4_err_ = (expr)) return dsv4_err_; \
  } while (0)

// Parses the body: size is checked by the caller (and the HTTP layer); depth and syntax here.
std::optional<ApiError> parse_body(std::string_view body, const RequestLimits& limits, Json* out) {
  if (body.size() > limits.max_body_bytes) {
    ApiError e = bad_request("body_too_large", "request body is " + std::to_string(body.size()) +
                                                   " bytes; the limit is " + std::to_string(limits.max_body_bytes));
    e.http_status = 413;
    return e;
  }
  const int depth = json_nesting_depth(body, limits.max_json_depth);
  if (depth > limits.max_json_depth) {
    return bad_request("json_too_deep",
                       "request JSON nests deeper than the limit of " + std::to_string(limits.max_json_depth));
  }
  *out = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return bad_request("invalid_json", "request body is not valid JSON");
  if (!out->is_object()) return bad_request("invalid_json", "request body must be a JSON object");
  return std::nullopt;
}

std::optional<ApiError> parse_model(const Json& root, std::string* model) {
  auto it = root.find("model");
  if (it == root.end() || it->is_null()) return bad_request("missing_field", "'model' is required", "model");
  if (!it->is_string()) return wrong_type("model", "a string", *it);
  *model = it->get<std::string>();
  return std::nullopt;
}

// Fields shared by both endpoints. `legacy_logprobs`: /v1/completions takes `logprobs` as an integer.
std::optional<ApiError> parse_sampling(const Json& root, const RequestLimits& limits, bool legacy_logprobs,
                                       ApiSampling* s) {
  ObjectReader r(root, "");
  std::optional<int64_t> i;

  // max_completion_tokens is the current name; max_tokens the deprecated one. Both are checked.
  DSV4_TRY(r.get_int("max_tokens", 1, std::numeric_limits<int32_t>::max(), &s->max_tokens));
  i.reset();
  DSV4_TRY(r.get_int("max_completion_tokens", 1, std::numeric_limits<int32_t>::max(), &i));
  if (i) s->max_tokens = i;

  DSV4_TRY(r.get_float("temperature", 0.0, 2.0, &s->temperature));
  DSV4_TRY(r.get_float("top_p", 0.0, 1.0, &s->top_p));
  if (r.find("top_p") && s->top_p <= 0.0f) return out_of_range("top_p", "must be greater than 0");
  i.reset();
  DSV4_TRY(r.get_int("top_k", 0, 1 << 20, &i));
  if (i) s->top_k = static_cast<int32_t>(*i);
  DSV4_TRY(r.get_float("min_p", 0.0, 1.0, &s->min_p));
  DSV4_TRY(r.get_float("frequency_penalty", -2.0, 2.0, &s->frequency_penalty));
  DSV4_TRY(r.get_float("presence_penalty", -2.0, 2.0, &s->presence_penalty));
  DSV4_TRY(r.get_float("repetition_penalty", 0.01, 10.0, &s->repetition_penalty));
  DSV4_TRY(r.get_bool("ignore_eos", &s->ignore_eos));

  if (const Json* seed = r.find("seed")) {
    if (seed->is_number_unsigned()) {
      s->seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer()) {
      return out_of_range("seed", "must be a non-negative integer");
    } else {
      return wrong_type("seed", "an integer", *seed);
    }
  }

  i.reset();
  DSV4_TRY(r.get_int("n", 1, limits.max_n, &i));
  if (i) s->n = static_cast<int32_t>(*i);
  if (const Json* best_of = r.find("best_of")) {
    if (!best_of->is_number_integer() || best_of->get<int64_t>() != s->n) {
      return bad_request("unsupported_parameter", "'best_of' is not supported (only best_of == n)", "best_of");
    }
  }

  if (const Json* stop = r.find("stop")) {
    if (stop->is_string()) {
      s->stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (stop->size() > static_cast<size_t>(limits.max_stop_strings)) {
        return out_of_range("stop", "may hold at most " + std::to_string(limits.max_stop_strings) + " strings");
      }
      for (size_t k = 0; k < stop->size(); ++k) {
        const Json& e = (*stop)[k];
        if (!e.is_string()) return wrong_type("stop[" + std::to_string(k) + "]", "a string", e);
        s->stop.push_back(e.get<std::string>());
      }
    } else {
      return wrong_type("stop", "a string or an array of strings", *stop);
    }
    for (const auto& str : s->stop) {
      if (str.empty()) return out_of_range("stop", "must not contain empty strings");
      if (str.size() > limits.max_stop_string_bytes) {
        return out_of_range("stop", "strings must be at most " + std::to_string(limits.max_stop_string_bytes) +
                                        " bytes");
      }
    }
  }

  if (legacy_logprobs) {
    // /v1/completions: logprobs is an integer count of alternatives (0..5 in OpenAI; we allow the limit).
    i.reset();
    DSV4_TRY(r.get_int("logprobs", 0, limits.max_top_logprobs, &i));
    if (i) {
      s->logprobs = true;
      s->top_logprobs = static_cast<int32_t>(*i);
    }
  } else {
    DSV4_TRY(r.get_bool("logprobs", &s->logprobs));
    i.reset();
    DSV4_TRY(r.get_int("top_logprobs", 0, limits.max_top_logprobs, &i));
    if (i) {
      if (!s->logprobs) return bad_request("invalid_value", "'top_logprobs' requires 'logprobs': true", "top_logprobs");
      s->top_logprobs = static_cast<int32_t>(*i);
    }
  }

  DSV4_TRY(r.get_bool("stream", &s->stream));
  if (const Json* so = r.find("stream_options")) {
    if (!so->is_object()) return wrong_type("stream_options", "an object", *so);
    if (!s->stream) {
      return bad_request("invalid_value", "'stream_options' is only allowed when 'stream' is true", "stream_options");
    }
    DSV4_TRY(ObjectReader(*so, "stream_options").get_bool("include_usage", &s->include_usage));
  }
  return std::nullopt;
}

// Message content: a string, null, or an array of {type:"text", text} parts (joined with "\n\n" as the
// reference encoder joins tool-result parts; chat-format.md §2.1).
std::optional<ApiError> parse_content(const Json& v, const std::string& param, std::optional<std::string>* out) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) {
    *out = v.get<std::string>();
    return std::nullopt;
  }
  if (!v.is_array()) return wrong_type(param, "a string or an array of content parts", v);
  std::string joined;
  for (size_t k = 0; k < v.size(); ++k) {
    const Json& part = v[k];
    const std::string pp = param + "[" + std::to_string(k) + "]";
    if (!part.is_object()) return wrong_type(pp, "an object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return bad_request("missing_field", "'" + pp + ".type' is required", pp + ".type");
    if (*type != "text") {
      return bad_request("unsupported_content", "content part type '" + type->get<std::string>() +
                                                    "' is not supported (text only)", pp + ".type");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return wrong_type(pp + ".text", "a string", text == part.end() ? Json() : *text);
    if (k > 0) joined += "\n\n";
    joined += text->get<std::string>();
  }
  *out = std::move(joined);
  return std::nullopt;
}

std::optional<ApiError> parse_tool_call(const Json& v, const std::string& param, ApiToolCall* out) {
  if (!v.is_object()) return wrong_type(param, "an object", v);
  ObjectReader r(v, param);
  std::optional<std::string> id, type;
  DSV4_TRY(r.get_string("id", &id));
  DSV4_TRY(r.get_string("type", &type));
  if (type && *type != "function") return out_of_range(param + ".type", "must be \"function\"");
  const Json* fn = r.find("function");
  if (!fn) return bad_request("missing_field", "'" + param + ".function' is required", param + ".function");
  if (!fn->is_object()) return wrong_type(param + ".function", "an object", *fn);
  ObjectReader fr(*fn, param + ".function");
  std::optional<std::string> name, args;
  DSV4_TRY(fr.get_string("name", &name));
  if (!name || name->empty()) return bad_request("missing_field", "'" + param + ".function.name' is required", param + ".function.name");
  DSV4_TRY(fr.get_string("arguments", &args));
  out->id = id.value_or("");
  out->name = *name;
  out->arguments = args.value_or("{}");
  return std::nullopt;
}

std::optional<ApiError> parse_message(const Json& v, const std::string& param, ApiMessage* m) {
  if (!v.is_object()) return wrong_type(param, "an object", v);
  ObjectReader r(v, param);
  std::optional<std::string> role;
  DSV4_TRY(r.get_string("role", &role));
  if (!role) return bad_request("missing_field", "'" + param + ".role' is required", param + ".role");
  if (*role == "developer") role = "system";
  if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
    return out_of_range(param + ".role", "must be one of system, developer, user, assistant, tool");
  }
  m->role = *role;
  if (const Json* c = r.find("content")) DSV4_TRY(parse_content(*c, param + ".content", &m->content));
  DSV4_TRY(r.get_string("name", &m->name));

  if (m->role == "assistant") {
    // reasoning_content (DeepSeek) or reasoning (some clients) comes back on later turns.
    DSV4_TRY(r.get_string("reasoning_content", &m->reasoning_content));
    if (!m->reasoning_content) DSV4_TRY(r.get_string("reasoning", &m->reasoning_content));
    if (const Json* tcs = r.find("tool_calls")) {
      if (!tcs->is_array()) return wrong_type(param + ".tool_calls", "an array", *tcs);
      for (size_t k = 0; k < tcs->size(); ++k) {
        ApiToolCall tc;
        DSV4_TRY(parse_tool_call((*tcs)[k], param + ".tool_calls[" + std::to_string(k) + "]", &tc));
        m->tool_calls.push_back(std::move(tc));
      }
    }
    if (!m->content && m->tool_calls.empty() && !m->reasoning_content) {
      return bad_request("missing_field", "'" + param + "' needs content or tool_calls", param + ".content");
    }
  } else if (m->role == "tool") {
    DSV4_TRY(r.get_string("tool_call_id", &m->tool_call_id));
    if (!m->tool_call_id) return bad_request("missing_field", "'" + param + ".tool_call_id' is required", param + ".tool_call_id");
    if (!m->content) return bad_request("missing_field", "'" + param + ".content' is required", param + ".content");
  } else if (!m->content) {
    return bad_request("missing_field", "'" + param + ".content' is required", param + ".content");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tools(const Json& root, const RequestLimits& limits, ChatCompletionRequest* req) {
  auto it = root.find("tools");
  if (it == root.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) return wrong_type("tools", "an array", *it);
  if (it->size() > limits.max_tools) return out_of_range("tools", "may hold at most " + std::to_string(limits.max_tools) + " tools");
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& t = (*it)[k];
    const std::string p = "tools[" + std::to_string(k) + "]";
    if (!t.is_object()) return wrong_type(p, "an object", t);
    ObjectReader r(t, p);
    std::optional<std::string> type;
    DSV4_TRY(r.get_string("type", &type));
    if (type.value_or("function") != "function") return out_of_range(p + ".type", "must be \"function\"");
    const Json* fn = r.find("function");
    if (!fn) return bad_request("missing_field", "'" + p + ".function' is required", p + ".function");
    if (!fn->is_object()) return wrong_type(p + ".function", "an object", *fn);
    ObjectReader fr(*fn, p + ".function");
    std::optional<std::string> name, desc;
    DSV4_TRY(fr.get_string("name", &name));
    DSV4_TRY(fr.get_string("description", &desc));
    if (!name || name->empty()) return bad_request("missing_field", "'" + p + ".function.name' is required", p + ".function.name");
    for (char c : *name) {
      // OpenAI's rule: a-z, A-Z, 0-9, underscores and dashes. Also keeps names safe inside DSML quotes.
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) {
        return out_of_range(p + ".function.name", "may contain only letters, digits, '_' and '-'");
      }
    }
    if (name->size() > 64) return out_of_range(p + ".function.name", "must be at most 64 characters");
    for (const auto& prev : req->tools) {
      if (prev.name == *name) return out_of_range(p + ".function.name", "duplicates an earlier tool name");
    }
    ApiTool tool;
    tool.name = *name;
    tool.description = desc.value_or("");
    if (const Json* params = fr.find("parameters")) {
      if (!params->is_object()) return wrong_type(p + ".function.parameters", "an object", *params);
      tool.parameters_json = params->dump(-1, ' ', false, Json::error_handler_t::replace);
    } else {
      tool.parameters_json = "{}";
    }
    tool.function_json = fn->dump(-1, ' ', false, Json::error_handler_t::replace);
    req->tools.push_back(std::move(tool));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice(const Json& root, ChatCompletionRequest* req) {
  auto it = root.find("tool_choice");
  if (it == root.end() || it->is_null()) return std::nullopt;
  const Json& v = *it;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "auto") req->tool_choice.kind = ToolChoiceKind::kAuto;
    else if (s == "none") req->tool_choice.kind = ToolChoiceKind::kNone;
    else if (s == "required") req->tool_choice.kind = ToolChoiceKind::kRequired;
    else return out_of_range("tool_choice", "must be \"auto\", \"none\", \"required\" or a named function");
  } else if (v.is_object()) {
    auto fn = v.find("function");
    if (fn == v.end() || !fn->is_object()) return bad_request("missing_field", "'tool_choice.function' is required", "tool_choice.function");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) return wrong_type("tool_choice.function.name", "a string", name == fn->end() ? Json() : *name);
    req->tool_choice.kind = ToolChoiceKind::kNamed;
    req->tool_choice.name = name->get<std::string>();
    bool found = false;
    for (const auto& t : req->tools) found = found || t.name == req->tool_choice.name;
    if (!found) return out_of_range("tool_choice.function.name", "names no tool in 'tools'");
  } else {
    return wrong_type("tool_choice", "a string or an object", v);
  }
  if (req->tools.empty() && (req->tool_choice.kind == ToolChoiceKind::kRequired || req->tool_choice.kind == ToolChoiceKind::kNamed)) {
    return bad_request("invalid_value", "'tool_choice' requires 'tools'", "tool_choice");
  }
  return std::nullopt;
}

// thinking on/off: chat_template_kwargs.{thinking,enable_thinking} (vLLM), thinking.type (DeepSeek API),
// reasoning_effort ("none" = off). chat-format.md §2.1.
std::optional<ApiError> parse_thinking(const Json& root, ChatCompletionRequest* req) {
  ObjectReader r(root, "");
  if (const Json* kw = r.find("chat_template_kwargs")) {
    if (!kw->is_object()) return wrong_type("chat_template_kwargs", "an object", *kw);
    ObjectReader kr(*kw, "chat_template_kwargs");
    DSV4_TRY(kr.get_bool("thinking", &req->thinking));
    DSV4_TRY(kr.get_bool("enable_thinking", &req->thinking));
  }
  if (const Json* th = r.find("thinking")) {
    if (th->is_boolean()) {
      req->thinking = th->get<bool>();
    } else if (th->is_object()) {
      std::optional<std::string> type;
      DSV4_TRY(ObjectReader(*th, "thinking").get_string("type", &type));
      if (type && *type != "enabled" && *type != "disabled") return out_of_range("thinking.type", "must be \"enabled\" or \"disabled\"");
      if (type) req->thinking = *type == "enabled";
    } else {
      return wrong_type("thinking", "an object or a boolean", *th);
    }
  }
  std::optional<std::string> effort;
  DSV4_TRY(r.get_string("reasoning_effort", &effort));
  if (effort) {
    static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    bool ok = false;
    for (const char* e : kEfforts) ok = ok || *effort == e;
    if (!ok) return out_of_range("reasoning_effort", "must be one of none, minimal, low, medium, high, xhigh, max");
    if (*effort == "none") {
      req->thinking = false;
    } else {
      req->reasoning_effort = effort;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_chat_request(std::string_view body, const RequestLimits& limits,
                                           ChatCompletionRequest* out) {
  Json root;
  DSV4_TRY(parse_body(body, limits, &root));
  DSV4_TRY(parse_model(root, &out->model));

  auto msgs = root.find("messages");
  if (msgs == root.end() || msgs->is_null()) return bad_request("missing_field", "'messages' is required", "messages");
  if (!msgs->is_array()) return wrong_type("messages", "an array", *msgs);
  if (msgs->empty()) return bad_request("invalid_value", "'messages' must not be empty", "messages");
  if (msgs->size() > limits.max_messages) {
    return out_of_range("messages", "may hold at most " + std::to_string(limits.max_messages) + " messages");
  }
  for (size_t k = 0; k < msgs->size(); ++k) {
    ApiMessage m;
    DSV4_TRY(parse_message((*msgs)[k], "messages[" + std::to_string(k) + "]", &m));
    out->messages.push_back(std::move(m));
  }

  DSV4_TRY(parse_tools(root, limits, out));
  DSV4_TRY(parse_tool_choice(root, out));
  if (auto ptc = root.find("parallel_tool_calls"); ptc != root.end() && !ptc->is_null() && !ptc->is_boolean()) {
    return wrong_type("parallel_tool_calls", "a boolean", *ptc);
  }
  DSV4_TRY(parse_thinking(root, out));

  if (auto rf = root.find("response_format"); rf != root.end() && !rf->is_null()) {
    if (!rf->is_object()) return wrong_type("response_format", "an object", *rf);
    auto type = rf->find("type");
    if (type == rf->end() || !type->is_string()) return bad_request("missing_field", "'response_format.type' is required", "response_format.type");
    if (*type == "json_object") {
      out->json_response_format = true;
    } else if (*type == "json_schema") {
      return bad_request("unsupported_parameter", "response_format 'json_schema' is not supported; use 'json_object'",
                         "response_format.type");
    } else if (*type != "text") {
      return out_of_range("response_format.type", "must be \"text\" or \"json_object\"");
    }
  }
  DSV4_TRY(parse_sampling(root, limits, /*legacy_logprobs=*/false, &out->sampling));
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(std::string_view body, const RequestLimits& limits,
                                                 CompletionRequest* out) {
  Json root;
  DSV4_TRY(parse_body(body, limits, &root));
  DSV4_TRY(parse_model(root, &out->model));

  auto p = root.find("prompt");
  if (p == root.end() || p->is_null()) return bad_request("missing_field", "'prompt' is required", "prompt");
  if (p->is_string()) {
    out->prompt_text = p->get<std::string>();
  } else if (p->is_array()) {
    if (p->empty()) return bad_request("invalid_value", "'prompt' must not be empty", "prompt");
    if ((*p)[0].is_string()) {
      // A batch of prompts; one prompt per request here (use n for several choices).
      if (p->size() != 1) return bad_request("unsupported_parameter", "a batch of prompts is not supported; send one prompt per request", "prompt");
      out->prompt_text = (*p)[0].get<std::string>();
    } else {
      std::vector<int32_t> ids;
      ids.reserve(p->size());
      for (size_t k = 0; k < p->size(); ++k) {
        const Json& e = (*p)[k];
        const std::string pp = "prompt[" + std::to_string(k) + "]";
        if (!e.is_number_integer()) return wrong_type(pp, "a token id (integer)", e);
        const int64_t id = e.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(e.get<uint64_t>(), INT64_MAX)) : e.get<int64_t>();
        const int64_t hi = limits.vocab_size > 0 ? limits.vocab_size - 1 : std::numeric_limits<int32_t>::max();
        if (id < 0 || id > hi) return out_of_range(pp, "must be a token id in [0, " + std::to_string(hi) + "]");
        ids.push_back(static_cast<int32_t>(id));
      }
      out->prompt_ids = std::move(ids);
    }
  } else {
    return wrong_type("prompt", "a string or an array of token ids", *p);
  }
  if (auto echo = root.find("echo"); echo != root.end() && !echo->is_null()) {
    if (!echo->is_boolean()) return wrong_type("echo", "a boolean", *echo);
    if (echo->get<bool>()) return bad_request("unsupported_parameter", "'echo' is not supported", "echo");
  }
  if (auto suffix = root.find("suffix"); suffix != root.end() && !suffix->is_null()) {
    return bad_request("unsupported_parameter", "'suffix' is not supported", "suffix");
  }
  DSV4_TRY(parse_sampling(root, limits, /*legacy_logprobs=*/true, &out->sampling));
  return std::nullopt;
}

}  // namespace dsv4::server
