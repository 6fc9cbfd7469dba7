// unit: TokenEvent text and stop strings through the real tokenizer (shared/tokenizer): a scripted
// runner emits the tokens of a known text; the concatenated event text must equal Tokenizer::decode,
// and a stop string spanning tokens must cut the text right before it.
#include <gtest/gtest.h>

#include "runtime/engine_core.h"
#include "runtime/tokenizer_detokenizer.h"
#include "test_util.h"

namespace dsv4 {
namespace {

// Greedy output = `script` in order, after a prompt of `prompt_len` tokens.
class ScriptedRunner : public ModelRunner {
 public:
  ScriptedRunner(int32_t vocab, std::vector<int32_t> script, int32_t prompt_len)
      : script_(std::move(script)), prompt_len_(prompt_len) {
    info_.vocab_size = vocab;
    info_.context_size = 4096;
    info_.eos_token_id = 1;
    info_.footprint.compressed_main_per_token = 16;
  }
  const RunnerInfo& info() const override { return info_; }
  Result<SeqSlot> create_sequence() override {
    lens_.push_back(0);
    return static_cast<SeqSlot>(lens_.size() - 1);
  }
  void free_sequence(SeqSlot) override {}
  int32_t length(SeqSlot s) const override { return lens_[static_cast<size_t>(s)]; }
  Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) override {
    logits->clear();
    for (const RunnerToken& t : batch) {
      lens_[static_cast<size_t>(t.seq)] = t.pos + 1;
      if (!t.want_logits) continue;
      const size_t i = static_cast<size_t>(t.pos + 1 - prompt_len_);
      logits->resize(logits->size() + static_cast<size_t>(info_.vocab_size), 0.0f);
      (*logits)[logits->size() - static_cast<size_t>(info_.vocab_size) + static_cast<size_t>(script_.at(i))] = 10.0f;
    }
    return Status::ok();
  }
  Status truncate(SeqSlot, int32_t) override { return unimplemented("scripted", "no rollback"); }
  Status copy_prefix(SeqSlot, SeqSlot, int32_t) override { return unimplemented("scripted", "no copy"); }
  Status draft(std::span<const RunnerToken>, std::vector<float>*) override { return unimplemented("scripted", "no MTP"); }

 private:
  RunnerInfo info_;
  std::vector<int32_t> script_;
  int32_t prompt_len_;
  std::vector<int32_t> lens_;
};

struct TextRun {
  std::string text;
  FinishReason finish = FinishReason::kNone;
  size_t n_tokens = 0;
};

TextRun generate(const std::shared_ptr<const Tokenizer>& tok, const std::vector<int32_t>& script,
             std::vector<std::string> stops) {
  ScriptedRunner runner(static_cast<int32_t>(tok->vocab_size()), script, 3);
  TokenizerDetokenizer detok(tok);
  EngineCoreOptions opt;
  opt.pool_blocks = 64;
  EngineCore core(&runner, &detok, opt);
  GenerationRequest r;
  r.prompt_ids = {10, 11, 12};
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = static_cast<int32_t>(script.size());
  r.stop.ignore_eos = true;
  r.stop.stop_strings = std::move(stops);
  TextRun out;
  EXPECT_TRUE(core.add(1, r, [&](const GenerationUpdate& u) {
                    for (const auto& e : u.tokens) out.text += e.text;
                    out.n_tokens += u.tokens.size();
                    if (u.finish != FinishReason::kNone) out.finish = u.finish;
                  }).is_ok());
  while (core.has_work()) EXPECT_TRUE(core.step().is_ok());
  return out;
}

TEST(RuntimeTokenizerText, EventTextEqualsDecodeAndStopStringsCutAcrossTokens) {
  auto loaded = Tokenizer::load(test::shared_dir() / "tokenizer/tokenizer.json");
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  auto tok = std::make_shared<const Tokenizer>(std::move(loaded).value());
  const std::string text = "Grüße, 世界! The end is near. STOP right there 🙂";
  const std::vector<int32_t> script = tok->encode(text, /*allow_special=*/false);
  ASSERT_GT(script.size(), 8u);

  const TextRun full = generate(tok, script, {});
  EXPECT_EQ(full.finish, FinishReason::kLength);
  EXPECT_EQ(full.text, tok->decode(script));
  EXPECT_EQ(full.text, text);

  const TextRun stopped = generate(tok, script, {"d is n", "STOP"});  // "d is n" spans several tokens
  EXPECT_EQ(stopped.finish, FinishReason::kStop);
  EXPECT_EQ(stopped.text, "Grüße, 世界! The en");
  EXPECT_LT(stopped.n_tokens, script.size());

  const TextRun late = generate(tok, script, {"🙂"});  // the stop string is the last character
  EXPECT_EQ(late.finish, FinishReason::kStop);
  EXPECT_EQ(late.text, "Grüße, 世界! The end is near. STOP right there ");
}

}  // namespace
}  // namespace dsv4
