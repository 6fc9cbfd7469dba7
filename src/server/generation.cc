// server: per-request generation state and the OpenAI JSON it produces (chat.completion(.chunk),
// text_completion), including usage with reasoning-token counts and logprobs.
#include "server/generation.h"

#include <nlohmann/json.hpp>

#include "server/random_id.h"

namespace dsv4::server {
namespace {

using Json = nlohmann::ordered_json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json bytes_of(const std::string& s) {
  Json arr = Json::array();
  for (unsigned char c : s) arr.push_back(static_cast<int>(c));
  return arr;
}

}  // namespace

void UpdateChannel::push(int choice, GenerationUpdate update) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(choice, std::move(update));
  }
  cv_.notify_one();
}

std::vector<std::pair<int, GenerationUpdate>> UpdateChannel::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); });
  std::vector<std::pair<int, GenerationUpdate>> out(std::make_move_iterator(queue_.begin()),
                                                    std::make_move_iterator(queue_.end()));
  queue_.clear();
  return out;
}

Generation::Generation(Engine& engine, const ChatCodec& codec, Metrics& metrics, GenerationPlan plan)
    : engine_(engine),
      codec_(codec),
      metrics_(metrics),
      plan_(std::move(plan)),
      channel_(std::make_shared<UpdateChannel>()),
      choices_(static_cast<size_t>(plan_.sampling.n)) {
  id_ = random_id(plan_.endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-", 29);
  created_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (auto& c : choices_) c.parser = codec_.make_output_parser(plan_.thinking, plan_.parse_tools);
}

Generation::~Generation() { cancel_all(); }

std::optional<ApiError> Generation::start() {
  start_time_ = std::chrono::steady_clock::now();
  for (size_t i = 0; i < choices_.size(); ++i) {
    GenerationRequest req;
    req.prompt_ids = plan_.prompt_ids;
    const ApiSampling& s = plan_.sampling;
    req.sampling.temperature = s.temperature;
    req.sampling.top_p = s.top_p;
    req.sampling.top_k = s.top_k;
    req.sampling.min_p = s.min_p;
    req.sampling.repetition_penalty = s.repetition_penalty;
    req.sampling.frequency_penalty = s.frequency_penalty;
    req.sampling.presence_penalty = s.presence_penalty;
    // n > 1 with a seed: choice i uses seed + i, so the choices differ but the request stays reproducible.
    if (s.seed) req.sampling.seed = *s.seed + i;
    req.sampling.top_logprobs = s.logprobs ? s.top_logprobs : -1;
    req.stop.max_tokens = plan_.max_tokens;
    req.stop.stop_strings = s.stop;
    req.stop.ignore_eos = s.ignore_eos;
    std::weak_ptr<UpdateChannel> weak = channel_;
    const int index = static_cast<int>(i);
    Result<RequestId> id = engine_.submit(std::move(req), [weak, index](const GenerationUpdate& u) {
      if (auto ch = weak.lock()) ch->push(index, u);
    });
    if (!id.is_ok()) {
      cancel_all();
      return api_error_from_status(id.status());
    }
    choices_[i].engine_id = *id;
    choices_[i].submitted = true;
  }
  metrics_.add_tokens(static_cast<int64_t>(plan_.prompt_ids.size()), 0);
  return std::nullopt;
}

bool Generation::done() const {
  for (const auto& c : choices_) {
    if (c.submitted && !c.finished) return false;
  }
  return true;
}

void Generation::cancel_all() {
  for (auto& c : choices_) {
    if (c.submitted && !c.finished) engine_.cancel(c.engine_id);
  }
  cancel_requested_ = true;
}

void Generation::poll(std::chrono::milliseconds timeout, std::vector<std::string>* chunks) {
  for (auto& [index, update] : channel_->wait(timeout)) handle_update(index, update, chunks);
}

void Generation::handle_update(int index, const GenerationUpdate& u, std::vector<std::string>* chunks) {
  Choice& c = choices_[static_cast<size_t>(index)];
  if (c.finished) return;
  const auto now = std::chrono::steady_clock::now();
  int32_t n_tokens = 0;
  for (const TokenEvent& ev : u.tokens) {
    ++n_tokens;
    const bool was_reasoning = c.parser->in_reasoning();
    OutputDelta d = c.parser->push(ev.text);
    if (was_reasoning) ++c.reasoning_tokens;
    apply_delta(index, d, {ev}, chunks);
  }
  if (n_tokens > 0) {
    if (!first_token_seen_) {
      first_token_seen_ = true;
      metrics_.observe_ttft(std::chrono::duration<double>(now - start_time_).count());
    }
    if (c.got_token) {
      const double gap = std::chrono::duration<double>(now - c.last_token).count() / n_tokens;
      for (int32_t k = 0; k < n_tokens; ++k) metrics_.observe_inter_token(gap);
    }
    c.got_token = true;
    c.last_token = now;
    c.completion_tokens += n_tokens;
    metrics_.add_tokens(0, n_tokens);
  }
  if (u.finish == FinishReason::kNone) return;

  c.finished = true;
  if (u.completion_tokens > c.completion_tokens) c.completion_tokens = u.completion_tokens;
  switch (u.finish) {
    case FinishReason::kStop:
      c.finish_reason = "stop";
      break;
    case FinishReason::kLength:
      c.finish_reason = "length";
      break;
    case FinishReason::kCancelled:
      c.finish_reason = "cancelled";
      if (!cancel_requested_) cancelled_by_engine_ = true;
      break;
    default: {
      c.finish_reason = "error";
      ApiError e = api_error_from_status(u.error.is_ok() ? internal_error("engine.error", "generation failed") : u.error);
      if (e.http_status < 500) e.http_status = 500, e.type = "server_error";
      error_ = e;
      break;
    }
  }
  OutputDelta tail = c.parser->finish(u.finish == FinishReason::kStop);
  apply_delta(index, tail, {}, chunks);
  if (c.finish_reason == "stop" && !c.tool_calls.empty()) c.finish_reason = "tool_calls";
  if (chunks && plan_.sampling.stream && (c.finish_reason == "stop" || c.finish_reason == "length" ||
                                          c.finish_reason == "tool_calls")) {
    chunks->push_back(chunk_json(index, "", {}, c.finish_reason.c_str()));
  }
}

void Generation::apply_delta(int index, const OutputDelta& d, const std::vector<TokenEvent>& tokens,
                             std::vector<std::string>* chunks) {
  Choice& c = choices_[static_cast<size_t>(index)];
  const bool want_logprobs = plan_.sampling.logprobs && !tokens.empty() && tokens[0].logprob.has_value();
  if (!plan_.sampling.stream) {
    c.content += d.content;
    c.reasoning += d.reasoning_content;
    for (const auto& f : d.tool_calls) {
      if (f.index >= static_cast<int>(c.tool_calls.size())) {
        c.tool_calls.resize(static_cast<size_t>(f.index) + 1);
        c.tool_calls[static_cast<size_t>(f.index)].id = random_id("call_", 24);
      }
      auto& tc = c.tool_calls[static_cast<size_t>(f.index)];
      if (f.name) tc.name = *f.name;
      tc.arguments += f.arguments;
    }
    if (want_logprobs) c.logprob_tokens.insert(c.logprob_tokens.end(), tokens.begin(), tokens.end());
    return;
  }
  if (d.empty() && !want_logprobs) return;
  if (plan_.endpoint == Endpoint::kCompletion) {
    // Completions have no reasoning/tool split: the parser is in chat mode without tools.
    chunks->push_back(chunk_json(index, d.content + d.reasoning_content, want_logprobs ? tokens : std::vector<TokenEvent>{}, nullptr));
    return;
  }
  Json delta = Json::object();
  if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
  if (!d.content.empty()) delta["content"] = d.content;
  if (!d.tool_calls.empty()) {
    Json arr = Json::array();
    for (const auto& f : d.tool_calls) {
      Json tc;
      tc["index"] = f.index;
      if (f.index >= static_cast<int>(c.tool_calls.size())) {
        c.tool_calls.resize(static_cast<size_t>(f.index) + 1);
        c.tool_calls[static_cast<size_t>(f.index)].id = random_id("call_", 24);
        tc["id"] = c.tool_calls[static_cast<size_t>(f.index)].id;
        tc["type"] = "function";
      }
      Json fn = Json::object();
      if (f.name) {
        c.tool_calls[static_cast<size_t>(f.index)].name = *f.name;
        fn["name"] = *f.name;
      }
      fn["arguments"] = f.arguments;
      tc["function"] = std::move(fn);
      arr.push_back(std::move(tc));
    }
    delta["tool_calls"] = std::move(arr);
  }
  chunks->push_back(chunk_json(index, dump(delta), want_logprobs ? tokens : std::vector<TokenEvent>{}, nullptr));
}

Json Generation::envelope(bool chunk) const {
  const bool chat = plan_.endpoint == Endpoint::kChat;
  Json j;
  j["id"] = id_;
  j["object"] = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  j["created"] = created_;
  j["model"] = plan_.model;
  return j;
}

Json Generation::logprobs_json(const std::vector<TokenEvent>& tokens) const {
  if (plan_.endpoint == Endpoint::kChat) {
    Json content = Json::array();
    for (const auto& ev : tokens) {
      Json e;
      e["token"] = ev.text;
      e["logprob"] = ev.logprob->logprob;
      e["bytes"] = bytes_of(ev.text);
      Json top = Json::array();
      for (const auto& alt : ev.top_logprobs) {
        const std::string t = alt.token == ev.token ? ev.text : codec_.token_text(alt.token);
        top.push_back(Json{{"token", t}, {"logprob", alt.logprob}, {"bytes", bytes_of(t)}});
      }
      e["top_logprobs"] = std::move(top);
      content.push_back(std::move(e));
    }
    return Json{{"content", std::move(content)}};
  }
  Json toks = Json::array(), lps = Json::array(), tops = Json::array();
  for (const auto& ev : tokens) {
    toks.push_back(ev.text);
    lps.push_back(ev.logprob->logprob);
    Json top = Json::object();
    for (const auto& alt : ev.top_logprobs) top[alt.token == ev.token ? ev.text : codec_.token_text(alt.token)] = alt.logprob;
    tops.push_back(std::move(top));
  }
  return Json{{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}};
}

std::string Generation::chunk_json(int index, const std::string& payload, const std::vector<TokenEvent>& tokens,
                                   const char* finish_reason) const {
  Json j = envelope(/*chunk=*/true);
  Json choice;
  choice["index"] = index;
  if (plan_.endpoint == Endpoint::kChat) {
    choice["delta"] = payload.empty() ? Json::object() : Json::parse(payload);
  } else {
    choice["text"] = payload;
  }
  choice["logprobs"] = tokens.empty() ? Json(nullptr) : logprobs_json(tokens);
  choice["finish_reason"] = finish_reason ? Json(finish_reason) : Json(nullptr);
  j["choices"] = Json::array({std::move(choice)});
  if (plan_.sampling.include_usage) j["usage"] = nullptr;
  return dump(j);
}

std::vector<std::string> Generation::opening_chunks() const {
  std::vector<std::string> out;
  if (plan_.endpoint != Endpoint::kChat) return out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    out.push_back(chunk_json(static_cast<int>(i), R"({"role":"assistant","content":""})", {}, nullptr));
  }
  return out;
}

Json Generation::usage_json() const {
  int64_t completion = 0, reasoning = 0;
  for (const auto& c : choices_) {
    completion += c.completion_tokens;
    reasoning += c.reasoning_tokens;
  }
  const int64_t prompt = static_cast<int64_t>(plan_.prompt_ids.size());
  Json u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  if (plan_.endpoint == Endpoint::kChat) u["completion_tokens_details"] = Json{{"reasoning_tokens", reasoning}};
  return u;
}

std::string Generation::usage_chunk() const {
  Json j = envelope(/*chunk=*/true);
  j["choices"] = Json::array();
  j["usage"] = usage_json();
  return dump(j);
}

std::string Generation::response_body() const {
  Json j = envelope(/*chunk=*/false);
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    Json choice;
    choice["index"] = static_cast<int>(i);
    if (plan_.endpoint == Endpoint::kChat) {
      Json msg;
      msg["role"] = "assistant";
      msg["content"] = (c.content.empty() && !c.tool_calls.empty()) ? Json(nullptr) : Json(c.content);
      if (plan_.thinking) msg["reasoning_content"] = c.reasoning.empty() ? Json(nullptr) : Json(c.reasoning);
      if (!c.tool_calls.empty()) {
        Json arr = Json::array();
        for (const auto& tc : c.tool_calls) {
          arr.push_back(Json{{"id", tc.id}, {"type", "function"}, {"function", Json{{"name", tc.name}, {"arguments", tc.arguments}}}});
        }
        msg["tool_calls"] = std::move(arr);
      }
      choice["message"] = std::move(msg);
    } else {
      choice["text"] = c.content + c.reasoning;
    }
    choice["logprobs"] = c.logprob_tokens.empty() ? Json(nullptr) : logprobs_json(c.logprob_tokens);
    choice["finish_reason"] = c.finish_reason;
    choices.push_back(std::move(choice));
  }
  j["choices"] = std::move(choices);
  j["usage"] = usage_json();
  return dump(j);
}

}  // namespace dsv4::server
