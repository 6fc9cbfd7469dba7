// server/testing: byte-level codec and a reasoning-only output parser.
#include "server/testing/simple_codec.h"

namespace dsv4::server::testing {
namespace {

constexpr std::string_view kThinkEnd = "</think>";

class ReasoningSplitParser final : public OutputParser {
 public:
  explicit ReasoningSplitParser(bool thinking) : reasoning_(thinking) {}

  OutputDelta push(std::string_view text) override {
    OutputDelta d;
    if (!reasoning_) {
      d.content.append(text);
      return d;
    }
    held_.append(text);
    const size_t p = held_.find(kThinkEnd);
    if (p != std::string::npos) {
      d.reasoning_content = held_.substr(0, p);
      d.content = held_.substr(p + kThinkEnd.size());
      held_.clear();
      reasoning_ = false;
      return d;
    }
    // Hold back a suffix that could be the start of "</think>".
    size_t keep = 0;
    for (size_t len = std::min(held_.size(), kThinkEnd.size() - 1); len > 0; --len) {
      if (held_.compare(held_.size() - len, len, kThinkEnd, 0, len) == 0) {
        keep = len;
        break;
      }
    }
    d.reasoning_content = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return d;
  }

  OutputDelta finish(bool stopped) override {
    OutputDelta d;
    if (reasoning_ && stopped) {
      d.content = held_;  // the model never closed its reasoning: the text is the answer (§3.2)
    } else {
      d.reasoning_content = held_;
    }
    held_.clear();
    reasoning_ = false;
    return d;
  }

  bool in_reasoning() const override { return reasoning_; }

 private:
  bool reasoning_;
  std::string held_;
};

void append_bytes(std::string_view s, std::vector<int32_t>* ids) {
  for (unsigned char c : s) ids->push_back(static_cast<int32_t>(c) + 3);
}

}  // namespace

Result<std::vector<int32_t>> SimpleCodec::encode_chat(const ChatCompletionRequest& request) const {
  std::vector<int32_t> ids;
  for (const auto& m : request.messages) {
    append_bytes("<" + m.role + ">", &ids);
    if (m.content) append_bytes(*m.content, &ids);
    for (const auto& tc : m.tool_calls) append_bytes("[call " + tc.name + " " + tc.arguments + "]", &ids);
  }
  for (const auto& t : request.tools) append_bytes("[tool " + t.name + "]", &ids);
  append_bytes(request.thinking ? "<assistant><think>" : "<assistant></think>", &ids);
  return ids;
}

Result<std::vector<int32_t>> SimpleCodec::encode_text(std::string_view text) const {
  std::vector<int32_t> ids;
  append_bytes(text, &ids);
  return ids;
}

std::string SimpleCodec::token_text(int32_t id) const {
  if (id >= 3 && id < 259) return std::string(1, static_cast<char>(id - 3));
  return "<tok" + std::to_string(id) + ">";
}

std::unique_ptr<OutputParser> SimpleCodec::make_output_parser(bool thinking, bool parse_tools) const {
  return std::make_unique<ReasoningSplitParser>(thinking);
}

}  // namespace dsv4::server::testing
