// tokenizer: the V4 output state machine (spec chat-format §3.2) and the whole-text parser on top.
#include "tokenizer/output_parser.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "tokenizer/py_json.h"

namespace dsv4 {
namespace {

constexpr std::string_view kThinkEnd = "</think>";
constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
constexpr std::string_view kToolCallsOpen = "<｜DSML｜tool_calls>";
constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke name=\"";
constexpr std::string_view kInvokeClose = "</｜DSML｜invoke>";
constexpr std::string_view kParamOpen = "<｜DSML｜parameter name=\"";
constexpr std::string_view kParamClose = "</｜DSML｜parameter>";
constexpr std::string_view kHeaderEnd = "\">";
constexpr std::string_view kDsml = "｜DSML｜";
constexpr std::string_view kStrayOpen = "<｜DSML｜", kStrayClose = "</｜DSML｜";
constexpr size_t kMaxHeaderBytes = 4096;  // a name or key longer than this is not DSML

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// Earliest occurrence of any marker: {position, marker index}, or {npos, -1}.
template <size_t N>
std::pair<size_t, int> find_marker(std::string_view buf, const std::array<std::string_view, N>& markers) {
  std::pair<size_t, int> best{std::string_view::npos, -1};
  for (size_t i = 0; i < N; ++i) {
    const size_t p = buf.find(markers[i]);
    if (p < best.first) best = {p, static_cast<int>(i)};
  }
  return best;
}

// Length of the longest suffix of `buf` that is a proper prefix of a marker: text that must be held
// until the next chunk shows whether the tag really follows.
template <size_t N>
size_t held_suffix(std::string_view buf, const std::array<std::string_view, N>& markers) {
  size_t best = 0;
  for (const std::string_view m : markers) {
    for (size_t k = std::min(m.size() - 1, buf.size()); k > best; --k) {
      if (buf.substr(buf.size() - k) == m.substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

// `buf` is (so far) a prefix of one of the markers.
template <size_t N>
bool is_marker_prefix(std::string_view buf, const std::array<std::string_view, N>& markers) {
  for (const std::string_view m : markers)
    if (buf.size() < m.size() && m.substr(0, buf.size()) == buf) return true;
  return false;
}

void delta_args(StreamingOutputParser::Delta& d, int index, std::string_view fragment) {
  if (!d.tool_calls.empty() && d.tool_calls.back().index == index) {
    d.tool_calls.back().arguments += fragment;
  } else {
    ToolCallDelta t;
    t.index = index;
    t.arguments = std::string(fragment);
    d.tool_calls.push_back(std::move(t));
  }
}

}  // namespace

StreamingOutputParser::StreamingOutputParser(ThinkingMode mode)
    : state_(mode == ThinkingMode::kThinking ? State::kReasoning : State::kContent) {}

StreamingOutputParser::Delta StreamingOutputParser::push(std::string_view text_chunk) {
  Delta d;
  buf_.append(text_chunk);
  while (step(false, d)) {
  }
  return d;
}

StreamingOutputParser::Delta StreamingOutputParser::finish() {
  Delta d;
  while (step(true, d)) {
  }
  switch (state_) {
    case State::kReasoning:
    case State::kContent: {
      const bool reasoning = state_ == State::kReasoning;
      flush_ws(reasoning, d);
      (reasoning ? d.reasoning_content : d.content) += buf_;
      break;
    }
    case State::kToolBlock:
    case State::kDone:
      break;
    default:
      break;
  }
  // The stream ended inside an invoke (cut off, or EOS before its close tag): its deltas were sent.
  truncated_ = n_calls_ > n_completed_;
  buf_.clear();
  state_ = State::kDone;
  return d;
}

void StreamingOutputParser::flush_ws(bool reasoning, Delta& d) {
  (reasoning ? d.reasoning_content : d.content) += ws_;
  note_emitted(reasoning, ws_);
  ws_.clear();
}

void StreamingOutputParser::note_emitted(bool reasoning, std::string_view text) {
  std::string& tail = tail_[reasoning ? 0 : 1];
  tail.append(text);
  if (tail.size() > kDsml.size()) tail.erase(0, tail.size() - kDsml.size());
}

// A dropped tag (or a tool block) can leave text already sent that ends in a piece of ｜DSML｜ right
// before text that completes it ("<｜DSML" + [stray tag] + "｜x>"): the completing part is dropped too,
// as a stray tag, so the joined output never spells the marker. 1: dropped, 0: nothing to do, -1: wait.
int StreamingOutputParser::drop_marker_completion(bool reasoning, bool at_end) {
  if (!ws_.empty()) return 0;  // held whitespace sits between: no marker can form
  const std::string& tail = tail_[reasoning ? 0 : 1];
  for (size_t k = 1; k < kDsml.size(); ++k) {
    if (tail.size() < k || std::string_view(tail).substr(tail.size() - k) != kDsml.substr(0, k)) continue;
    const std::string_view need = kDsml.substr(k);
    if (buf_.size() < need.size()) {
      if (!at_end && need.starts_with(buf_)) return -1;
      continue;
    }
    if (!buf_.starts_with(need)) continue;
    size_t j = need.size();
    while (j < buf_.size() && (std::isalnum(static_cast<unsigned char>(buf_[j])) || buf_[j] == '_')) ++j;
    if (j == buf_.size() && !at_end) return -1;  // the tag name may continue
    if (j < buf_.size() && buf_[j] == '>') ++j;
    buf_.erase(0, j);
    return 1;
  }
  return 0;
}

// Plain text: everything but a trailing whitespace run, which waits to see if a tool block follows.
void StreamingOutputParser::emit_text(bool reasoning, std::string_view text, Delta& d) {
  if (text.empty()) return;
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    ws_.append(text);
    return;
  }
  std::string& out = reasoning ? d.reasoning_content : d.content;
  out += ws_;
  note_emitted(reasoning, ws_);
  ws_.clear();
  out.append(text.substr(0, end));
  note_emitted(reasoning, text.substr(0, end));
  ws_.assign(text.substr(end));
}

void StreamingOutputParser::emit_args(std::string_view fragment, Delta& d) {
  delta_args(d, n_calls_ - 1, fragment);
}

void StreamingOutputParser::close_invoke(Delta& d) {
  emit_args(n_params_ == 0 ? "{}" : "}", d);
  ++n_completed_;
}

// Inside the tool block, text that is no tag is skipped up to the next '<' (never shown as content).
void StreamingOutputParser::drop_junk() {
  const size_t lt = buf_.find('<', 1);
  buf_.erase(0, lt == std::string::npos ? buf_.size() : lt);
}

bool StreamingOutputParser::step(bool at_end, Delta& d) {
  if (buf_.empty()) return false;
  switch (state_) {
    case State::kReasoning:
      return step_text(true, at_end, d);
    case State::kContent:
      return step_text(false, at_end, d);
    case State::kToolBlock:
      return step_tool_block(at_end);
    case State::kInvokeName:
      return step_invoke_name(d);
    case State::kArgs:
      return step_args(at_end, d);
    case State::kParamHeader:
      return step_param_header(d);
    case State::kParamString:
      return step_param_string(d);
    case State::kParamJson:
      return step_param_json(d);
    case State::kJsonBody:
      return step_json_body(d);
    case State::kDone:
      buf_.clear();
      return false;
  }
  return false;
}

bool StreamingOutputParser::step_text(bool reasoning, bool at_end, Delta& d) {
  // REASONING: </think> ends it, a tool block may start before it, a repeated <think> is dropped.
  // CONTENT: a stray </think> is dropped. Both: an invoke without its tool_calls wrapper still
  // starts a call, and any other DSML tag (a stray close tag, a bare ｜DSML｜) is removed, so no
  // DSML ever reaches the client as text (spec §4).
  static constexpr std::array<std::string_view, 6> kReasoningMarkers{kThinkEnd,   kToolCallsOpen, kEos,
                                                                     kThinkStart, kInvokeOpen,    kDsml};
  static constexpr std::array<std::string_view, 5> kContentMarkers{kToolCallsOpen, kEos, kThinkEnd, kInvokeOpen, kDsml};
  if (const int r = drop_marker_completion(reasoning, at_end); r != 0) return r > 0;
  // What a chunk may end in and must be held for: the markers, plus the "<" or "</" that a stray tag
  // around ｜DSML｜ drops with it (a held "｜DSM" alone would let "</" through before it).
  static constexpr std::array<std::string_view, 8> kReasoningHeld{kThinkEnd,   kToolCallsOpen, kEos,       kThinkStart,
                                                                  kInvokeOpen, kDsml,          kStrayOpen, kStrayClose};
  static constexpr std::array<std::string_view, 7> kContentHeld{kToolCallsOpen, kEos,       kThinkEnd,  kInvokeOpen,
                                                                kDsml,          kStrayOpen, kStrayClose};
  const auto [pos, which] = reasoning ? find_marker(buf_, kReasoningMarkers) : find_marker(buf_, kContentMarkers);
  if (which < 0) {
    if (at_end) return false;  // finish() flushes the rest as text
    const size_t hold = reasoning ? held_suffix(buf_, kReasoningHeld) : held_suffix(buf_, kContentHeld);
    emit_text(reasoning, std::string_view(buf_).substr(0, buf_.size() - hold), d);
    buf_.erase(0, buf_.size() - hold);
    return false;
  }
  const std::string_view marker = reasoning ? kReasoningMarkers[which] : kContentMarkers[which];
  size_t text_end = pos, consumed = pos + marker.size();
  if (marker == kDsml) {
    // A stray tag: drop "<" or "</" before the marker and a tag name (and ">") after it.
    if (text_end >= 2 && buf_.compare(text_end - 2, 2, "</") == 0)
      text_end -= 2;
    else if (text_end >= 1 && buf_[text_end - 1] == '<')
      text_end -= 1;
    // The tag may yet become a real one ("<｜DSML｜invoke nam" + "e=\"..."): wait for it. (A complete
    // marker there would have been found first, at the earlier position.)
    const std::string_view rest = std::string_view(buf_).substr(text_end);
    const bool may_be_tag =
        reasoning ? is_marker_prefix(rest, kReasoningMarkers) : is_marker_prefix(rest, kContentMarkers);
    size_t k = consumed;
    while (k < buf_.size() && (std::isalnum(static_cast<unsigned char>(buf_[k])) || buf_[k] == '_')) ++k;
    if ((k == buf_.size() || may_be_tag) && !at_end) {
      // The tag name may continue: emit the text before it and wait.
      emit_text(reasoning, std::string_view(buf_).substr(0, text_end), d);
      buf_.erase(0, text_end);
      return text_end > 0;
    }
    if (k < buf_.size() && buf_[k] == '>') ++k;
    consumed = k;
  }
  emit_text(reasoning, std::string_view(buf_).substr(0, text_end), d);
  buf_.erase(0, consumed);
  if (marker == kThinkEnd) {
    if (reasoning) {
      flush_ws(true, d);  // whitespace before </think> is part of the reasoning
      reasoning_closed_ = true;
      state_ = State::kContent;
    }
  } else if (marker == kToolCallsOpen || marker == kInvokeOpen) {
    ws_.clear();  // the "\n\n" before the block is not content
    if (reasoning) reasoning_closed_ = true;
    state_ = marker == kInvokeOpen ? State::kInvokeName : State::kToolBlock;
  } else if (marker == kEos) {
    flush_ws(reasoning, d);
    state_ = State::kDone;
  }
  return true;
}

bool StreamingOutputParser::step_tool_block(bool at_end) {
  static constexpr std::array<std::string_view, 3> kMarkers{kInvokeOpen, kToolCallsClose, kEos};
  size_t i = 0;
  while (i < buf_.size() && is_ws(buf_[i])) ++i;
  buf_.erase(0, i);
  if (buf_.empty()) return false;
  for (size_t k = 0; k < kMarkers.size(); ++k) {
    if (buf_.starts_with(kMarkers[k])) {
      buf_.erase(0, kMarkers[k].size());
      if (k == 0) {
        state_ = State::kInvokeName;
      } else if (k == 1) {
        state_ = State::kContent;  // only EOS should follow
      } else {
        state_ = State::kDone;
      }
      return true;
    }
  }
  if (is_marker_prefix(buf_, kMarkers) && !at_end) return false;
  drop_junk();
  return true;
}

bool StreamingOutputParser::step_invoke_name(Delta& d) {
  const size_t end = buf_.find(kHeaderEnd);
  const size_t bad = buf_.find_first_of("<\n");
  if (bad < end || (end == std::string::npos && buf_.size() > kMaxHeaderBytes)) {
    // Not a well-formed invoke header: skip it without starting a call.
    state_ = State::kToolBlock;
    drop_junk();
    return true;
  }
  if (end == std::string::npos) return false;
  ToolCallDelta t;
  t.index = n_calls_++;
  t.name = buf_.substr(0, end);
  d.tool_calls.push_back(std::move(t));
  buf_.erase(0, end + kHeaderEnd.size());
  n_params_ = 0;
  body_start_ = true;
  state_ = State::kArgs;
  return true;
}

bool StreamingOutputParser::step_args(bool at_end, Delta& d) {
  static constexpr std::array<std::string_view, 4> kMarkers{kParamOpen, kInvokeClose, kToolCallsClose, kEos};
  size_t i = 0;
  while (i < buf_.size() && is_ws(buf_[i])) ++i;
  buf_.erase(0, i);
  if (buf_.empty()) return false;
  // SGLang's variant: the invoke body is one JSON object. Only right after the header: once junk was
  // skipped, a '{' is more junk (else where a chunk ends inside junk would change the result).
  if (buf_[0] == '{' && n_params_ == 0 && body_start_) {
    state_ = State::kJsonBody;
    return true;
  }
  body_start_ = false;
  for (size_t k = 0; k < kMarkers.size(); ++k) {
    if (!buf_.starts_with(kMarkers[k])) continue;
    buf_.erase(0, kMarkers[k].size());
    if (k == 0) {
      state_ = State::kParamHeader;
    } else if (k == 1) {
      close_invoke(d);
      state_ = State::kToolBlock;
    } else if (k == 2) {
      close_invoke(d);  // the block closed around an unclosed invoke: keep the parameters seen
      state_ = State::kContent;
    } else {
      state_ = State::kDone;  // EOS mid-invoke: the call stays incomplete
    }
    return true;
  }
  if (is_marker_prefix(buf_, kMarkers) && !at_end) return false;
  drop_junk();
  return true;
}

bool StreamingOutputParser::step_param_header(Delta& d) {
  const size_t end = buf_.find(kHeaderEnd);
  const size_t bad = buf_.find_first_of("<\n");
  if (bad < end || (end == std::string::npos && buf_.size() > kMaxHeaderBytes)) {
    state_ = State::kArgs;  // not a parameter header: skip it
    drop_junk();
    return true;
  }
  if (end == std::string::npos) return false;
  // The header is KEY" string="true|false (the closing quote belongs to `">`).
  std::string_view h = std::string_view(buf_).substr(0, end);
  bool is_string = true;
  static constexpr std::string_view kTrue = "\" string=\"true", kFalse = "\" string=\"false";
  if (h.ends_with(kTrue)) {
    h.remove_suffix(kTrue.size());
  } else if (h.ends_with(kFalse)) {
    h.remove_suffix(kFalse.size());
    is_string = false;
  } else if (const size_t q = h.find('"'); q != std::string_view::npos) {
    h = h.substr(0, q);  // unknown attributes: keep the key, treat the value as a string
  }
  std::string head = n_params_ == 0 ? "{" : ", ";
  head += tok::py_json_quote(h);
  head += ": ";
  buf_.erase(0, end + kHeaderEnd.size());
  if (is_string) {
    head += "\"";
    emit_args(head, d);
    state_ = State::kParamString;
  } else {
    param_head_ = std::move(head);
    state_ = State::kParamJson;
  }
  return true;
}

// A value ends at its close tag; another parameter, the invoke close or the block close also end it
// (the model forgot </｜DSML｜parameter>), so DSML structure never lands inside an argument.
bool StreamingOutputParser::step_param_string(Delta& d) {
  static constexpr std::array<std::string_view, 5> kMarkers{kParamClose, kEos, kParamOpen, kInvokeClose,
                                                            kToolCallsClose};
  const auto [pos, which] = find_marker(buf_, kMarkers);
  std::string frag;
  if (which < 0) {
    const size_t hold = held_suffix(buf_, kMarkers);
    tok::py_json_escape_append(std::string_view(buf_).substr(0, buf_.size() - hold), frag);
    if (!frag.empty()) emit_args(frag, d);
    buf_.erase(0, buf_.size() - hold);
    return false;
  }
  tok::py_json_escape_append(std::string_view(buf_).substr(0, pos), frag);
  if (which == 1) {
    state_ = State::kDone;
    buf_.clear();
  } else {
    frag += "\"";
    ++n_params_;
    state_ = State::kArgs;
    // The close tag is consumed; an implicit close leaves the next tag for kArgs.
    buf_.erase(0, which == 0 ? pos + kMarkers[0].size() : pos);
  }
  if (!frag.empty()) emit_args(frag, d);
  return true;
}

bool StreamingOutputParser::step_param_json(Delta& d) {
  static constexpr std::array<std::string_view, 5> kMarkers{kParamClose, kEos, kParamOpen, kInvokeClose,
                                                            kToolCallsClose};
  const auto [pos, which] = find_marker(buf_, kMarkers);
  if (which < 0) return false;  // a non-string value is only checked once complete
  if (which == 1) {
    state_ = State::kDone;
    buf_.clear();
    return true;
  }
  const std::string_view value = std::string_view(buf_).substr(0, pos);
  std::string frag = std::move(param_head_);
  // Valid JSON goes in verbatim (spec §3.1); anything else falls back to a JSON string.
  if (tok::parse_json(value).is_ok())
    frag += value;
  else
    frag += tok::py_json_quote(value);
  emit_args(frag, d);
  ++n_params_;
  buf_.erase(0, which == 0 ? pos + kMarkers[0].size() : pos);
  state_ = State::kArgs;
  return true;
}

bool StreamingOutputParser::step_json_body(Delta& d) {
  static constexpr std::array<std::string_view, 2> kMarkers{kInvokeClose, kEos};
  const auto [pos, which] = find_marker(buf_, kMarkers);
  if (which < 0) return false;
  if (which == 1) {
    state_ = State::kDone;
    buf_.clear();
    return true;
  }
  std::string_view body = std::string_view(buf_).substr(0, pos);
  while (!body.empty() && is_ws(body.back())) body.remove_suffix(1);
  auto parsed = tok::parse_json(body);
  if (parsed.is_ok() && parsed->is_object())
    emit_args(body, d);
  else
    emit_args("{\"arguments\": " + tok::py_json_quote(body) + "}", d);
  ++n_completed_;
  n_params_ = 1;
  buf_.erase(0, pos + kMarkers[0].size());
  state_ = State::kToolBlock;
  return true;
}

ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode, CompletionEnd end) {
  StreamingOutputParser parser(mode);
  ParsedCompletion out;
  std::vector<std::string> names, args;
  auto absorb = [&](const StreamingOutputParser::Delta& d) {
    out.content += d.content;
    out.reasoning_content += d.reasoning_content;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (static_cast<size_t>(t.index) >= names.size()) {
        names.resize(t.index + 1);
        args.resize(t.index + 1);
      }
      names[t.index] += t.name;
      args[t.index] += t.arguments;
    }
  };
  absorb(parser.push(text));
  absorb(parser.finish());
  // Calls are completed in order, so the first tool_calls_completed() are the whole ones.
  for (int i = 0; i < parser.tool_calls_completed(); ++i) out.tool_calls.push_back({"", names[i], args[i]});
  if (mode == ThinkingMode::kThinking && !parser.reasoning_closed() && parser.tool_calls_started() == 0 &&
      end == CompletionEnd::kStop) {
    out.content = std::move(out.reasoning_content) + out.content;
    out.reasoning_content.clear();
  }
  return out;
}

}  // namespace dsv4
