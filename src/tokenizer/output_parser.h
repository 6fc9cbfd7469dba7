// tokenizer: model output → {content, reasoning_content, tool_calls} for the V4 format (spec
// chat-format §3), whole or incrementally. The streaming parser is a state machine over decoded
// text (tags are matched on text, never on token boundaries, because BPE fuses `}</` and `">\n`); it
// holds back any suffix that could start a tag, so no DSML or partial tag ever reaches content or
// arguments, and the concatenated argument deltas equal the whole-text result.
//
// Tool-call ids: the parser leaves every id empty; the server assigns unguessable ids itself.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat.h"

namespace dsv4 {

struct ParsedCompletion {
  std::string content;
  std::string reasoning_content;
  std::vector<ToolCall> tool_calls;  // only complete invokes; ids empty
};

// How generation ended: kStop (EOS or a stop condition) or kLength (token budget ran out).
enum class CompletionEnd { kStop, kLength };

// The whole completion (the text after the prompt, special tokens not skipped; EOS and anything
// after it are ignored). Thinking mode starts in reasoning, since the prompt ended with <think>.
// If thinking mode never closes </think>, calls no tool and `end` is kStop, the text is the answer
// and goes to content (vllm#48645); with kLength it stays reasoning. A call cut off mid-invoke is
// discarded (not completed with an invented "{}").
ParsedCompletion parse_completion(std::string_view text, ThinkingMode mode, CompletionEnd end = CompletionEnd::kStop);

struct ToolCallDelta {
  int index = 0;          // position of the call in this completion
  std::string id;         // always empty: the server assigns ids
  std::string name;       // set on the call's first delta only
  std::string arguments;  // the next fragment of the arguments JSON text
};

class StreamingOutputParser {
 public:
  explicit StreamingOutputParser(ThinkingMode mode);

  struct Delta {
    std::string content;
    std::string reasoning_content;
    std::vector<ToolCallDelta> tool_calls;  // at most one entry per call index, in order
    bool empty() const { return content.empty() && reasoning_content.empty() && tool_calls.empty(); }
  };

  // Feed the next decoded text (any split, even mid-tag). Returns what is now certain.
  Delta push(std::string_view text_chunk);
  // End of stream: flushes held-back plain text. A call still open (cut off, or EOS inside it) is
  // abandoned: its deltas were already sent, so truncated_tool_call() reports it (the server can log
  // it and must not count it); at most one call (the last) can be open.
  Delta finish();

  int tool_calls_started() const { return n_calls_; }
  int tool_calls_completed() const { return n_completed_; }
  bool truncated_tool_call() const { return truncated_; }
  bool reasoning_closed() const { return reasoning_closed_; }  // saw </think> (or tools ended reasoning)
  bool saw_eos() const { return state_ == State::kDone; }

 private:
  enum class State {
    kReasoning,
    kContent,
    kToolBlock,
    kInvokeName,
    kArgs,
    kParamHeader,
    kParamString,
    kParamJson,
    kJsonBody,
    kDone
  };

  // One step on buf_: consumes a prefix and returns true, or returns false to wait for more text.
  bool step(bool at_end, Delta& d);
  bool step_text(bool reasoning, bool at_end, Delta& d);
  bool step_tool_block(bool at_end);
  bool step_invoke_name(Delta& d);
  bool step_args(bool at_end, Delta& d);
  bool step_param_header(Delta& d);
  bool step_param_string(Delta& d);
  bool step_param_json(Delta& d);
  bool step_json_body(Delta& d);

  void emit_text(bool reasoning, std::string_view text, Delta& d);
  void flush_ws(bool reasoning, Delta& d);
  void note_emitted(bool reasoning, std::string_view text);
  int drop_marker_completion(bool reasoning, bool at_end);
  void emit_args(std::string_view fragment, Delta& d);
  void close_invoke(Delta& d);
  void drop_junk();

  State state_;
  std::string buf_;         // received, not yet consumed
  std::string ws_;          // trailing whitespace held: it is dropped if a tool block follows
  std::string param_head_;  // string=false: `, "key": ` waiting for the value
  std::string tail_[2];     // the last bytes sent as reasoning [0] / content [1] (a ｜DSML｜'s length)
  int n_calls_ = 0, n_completed_ = 0, n_params_ = 0;
  bool truncated_ = false;
  bool body_start_ = false;  // kArgs: nothing but whitespace seen since the invoke header
  bool reasoning_closed_ = false;
};

}  // namespace dsv4
