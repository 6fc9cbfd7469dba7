// unit: the runtime's scheduler/step loop against the history-dependent fake model. The oracle is the
// same request run alone: concurrency, chunked prefill, preemption, speculation and prefix caching must
// not change a single token. Each property has a negative control with a deliberately broken runner.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "runtime/engine_core.h"
#include "runtime/testing/fake_detokenizer.h"
#include "runtime/testing/fake_model_runner.h"

namespace dsv4 {
namespace {

using testing::FakeDetokenizer;
using testing::FakeModelOptions;
using testing::FakeModelRunner;
using Defect = FakeModelOptions::Defect;

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int32_t completion_tokens = 0;
  int32_t updates = 0;
  bool operator==(const Outcome& o) const {
    return tokens == o.tokens && text == o.text && finish == o.finish && completion_tokens == o.completion_tokens;
  }
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << "finish=" << static_cast<int>(o.finish) << " tokens=[";
  for (int32_t t : o.tokens) os << t << ' ';
  return os << "]";
}

using StepHook = std::function<void(EngineCore&, int64_t step, std::vector<Outcome>&)>;

// Runs `reqs` through one EngineCore until every request finished.
std::vector<Outcome> run_core(ModelRunner& runner, const EngineCoreOptions& opt, const std::vector<GenerationRequest>& reqs,
                              const Detokenizer* detok = nullptr, const StepHook& hook = {}) {
  EngineCore core(&runner, detok, opt);
  std::vector<Outcome> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Status st = core.add(static_cast<RequestId>(i + 1), reqs[i], [&out, i](const GenerationUpdate& u) {
      Outcome& o = out[i];
      ++o.updates;
      for (const TokenEvent& e : u.tokens) {
        o.tokens.push_back(e.token);
        o.text += e.text;
      }
      if (u.finish != FinishReason::kNone) {
        EXPECT_EQ(o.finish, FinishReason::kNone) << "finished twice";
        o.finish = u.finish;
        o.completion_tokens = u.completion_tokens;
      }
    });
    EXPECT_TRUE(st.is_ok()) << st.to_string();
  }
  int64_t steps = 0;
  while (core.has_work()) {
    if (hook) hook(core, steps, out);
    const Status st = core.step();
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    if (++steps > 100000) {
      ADD_FAILURE() << "no progress";
      break;
    }
  }
  return out;
}

std::vector<Outcome> run_alone(const FakeModelOptions& fo, const EngineCoreOptions& opt,
                               const std::vector<GenerationRequest>& reqs, const Detokenizer* detok = nullptr) {
  std::vector<Outcome> out;
  for (const GenerationRequest& r : reqs) {
    FakeModelRunner runner(fo);
    out.push_back(run_core(runner, opt, {r}, detok)[0]);
  }
  return out;
}

// Mixed prompt lengths (1 .. ~90 tokens), mixed max_tokens, some requests sampled.
std::vector<GenerationRequest> make_requests(uint32_t seed, int n, int32_t vocab, bool sampled_some) {
  std::mt19937 rng(seed);
  const int lengths[] = {1, 2, 5, 8, 13, 17, 31, 40, 64, 90};
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const int len = lengths[(static_cast<uint32_t>(i) * 7 + seed) % 10];
    for (int j = 0; j < len; ++j) r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 2)));
    r.sampling.temperature = 0.0f;
    if (sampled_some && i % 3 == 1) {
      r.sampling.temperature = 0.8f;
      r.sampling.top_p = 0.9f;
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    }
    r.stop.max_tokens = 8 + static_cast<int32_t>(rng() % 24);
    r.stop.ignore_eos = (i % 2) == 0;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

EngineCoreOptions small_batches() {
  EngineCoreOptions o;
  o.max_batch_tokens = 40;  // forces chunked prefill interleaved with decodes
  o.max_running = 16;
  o.block_tokens = 8;
  o.pool_blocks = 4096;
  return o;
}

TEST(RuntimeEngineCore, ConcurrentGreedyEqualsAlone) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    FakeModelOptions fo;
    const auto reqs = make_requests(seed, 16, fo.vocab_size, /*sampled_some=*/true);
    const auto alone = run_alone(fo, small_batches(), reqs);
    FakeModelRunner runner(fo);
    bool mixed_step = false;  // a step with both a prefill chunk and a decode
    const auto together = run_core(runner, small_batches(), reqs, nullptr, [&](EngineCore& c, int64_t, auto&) {
      int prefill = 0, decode = 0;
      for (const ScheduledSeq& s : c.last_schedule()) (s.n_tokens > 1 ? prefill : decode)++;
      mixed_step |= prefill > 0 && decode > 0;
    });
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(together[i], alone[i]) << "seed " << seed << " request " << i;
      EXPECT_NE(together[i].finish, FinishReason::kNone);
    }
    EXPECT_TRUE(mixed_step);
    EXPECT_EQ(runner.live_sequences(), 0);
  }
}

TEST(RuntimeEngineCore, NegativeControlLeakyRunnerIsCaught) {
  FakeModelOptions fo;
  fo.defect = Defect::kBatchLeak;
  const auto reqs = make_requests(1, 16, fo.vocab_size, false);
  const auto alone = run_alone(fo, small_batches(), reqs);
  FakeModelRunner runner(fo);
  const auto together = run_core(runner, small_batches(), reqs);
  int differing = 0;
  for (size_t i = 0; i < reqs.size(); ++i) differing += !(together[i] == alone[i]);
  EXPECT_GT(differing, 8);
}

TEST(RuntimeEngineCore, SpeculationEqualsPlainDecoding) {
  FakeModelOptions fo;
  const auto reqs = make_requests(4, 16, fo.vocab_size, /*sampled_some=*/false);
  const auto plain = run_alone(fo, small_batches(), reqs);
  for (int32_t k : {1, 2, 3}) {
    EngineCoreOptions o = small_batches();
    o.speculative_k = k;
    const auto alone = run_alone(fo, o, reqs);
    FakeModelRunner runner(fo);
    int64_t proposed = 0, accepted = 0;
    std::vector<Outcome> together;
    {
      EngineCore core(&runner, nullptr, o);
      together.resize(reqs.size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(core.add(i + 1, reqs[i], [&together, i](const GenerationUpdate& u) {
                          for (const auto& e : u.tokens) together[i].tokens.push_back(e.token);
                          if (u.finish != FinishReason::kNone) {
                            together[i].finish = u.finish;
                            together[i].completion_tokens = u.completion_tokens;
                          }
                        }).is_ok());
      }
      while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
      for (size_t j = 0; j < core.stats().spec.proposed.size(); ++j) {
        proposed += core.stats().spec.proposed[j];
        accepted += core.stats().spec.accepted[j];
      }
      EXPECT_EQ(static_cast<int32_t>(core.stats().spec.proposed.size()), k);
      EXPECT_EQ(core.pool().free_count(), core.pool().total());
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(alone[i], plain[i]) << "k=" << k << " request " << i << " alone";
      EXPECT_EQ(together[i], plain[i]) << "k=" << k << " request " << i << " concurrent";
    }
    // The fake draft is right part of the time: both outcomes occur, so both paths were exercised.
    EXPECT_GT(accepted, proposed / 5) << "k=" << k;
    EXPECT_LT(accepted, proposed) << "k=" << k;
  }
}

TEST(RuntimeEngineCore, NegativeControlInexactRollbackIsCaught) {
  FakeModelOptions fo;
  fo.defect = Defect::kStaleTruncate;
  const auto reqs = make_requests(4, 16, fo.vocab_size, false);
  const auto plain = run_alone(fo, small_batches(), reqs);
  EngineCoreOptions o = small_batches();
  o.speculative_k = 3;
  const auto spec = run_alone(fo, o, reqs);
  int differing = 0;
  for (size_t i = 0; i < reqs.size(); ++i) differing += !(spec[i] == plain[i]);
  EXPECT_GT(differing, 4);
}

TEST(RuntimeEngineCore, SeededSamplingIsBatchIndependentWithAndWithoutSpeculation) {
  FakeModelOptions fo;
  auto reqs = make_requests(5, 12, fo.vocab_size, false);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.9f;
    reqs[i].sampling.top_k = 20;
    reqs[i].sampling.seed = 77 + i % 3;  // shared seeds across different prompts are fine
  }
  for (int32_t k : {0, 2}) {
    EngineCoreOptions o = small_batches();
    o.speculative_k = k;
    const auto alone = run_alone(fo, o, reqs);
    FakeModelRunner runner(fo);
    const auto together = run_core(runner, o, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "k=" << k << " request " << i;
    // Same seed, same output; another seed, another output (for at least one request).
    auto reseeded = reqs;
    int changed = 0;
    for (auto& r : reseeded) r.sampling.seed = *r.sampling.seed + 100;
    const auto other = run_alone(fo, o, reseeded);
    for (size_t i = 0; i < reqs.size(); ++i) changed += !(other[i] == alone[i]);
    EXPECT_GT(changed, 0);
  }
}

// Prefix caching: a donor request runs first; then requests sharing its first m tokens (m at every
// offset across two windows and several compression blocks) must produce exactly the cold-run output.
void check_prefix_hits(Defect defect, int* n_differing, int* n_hits) {
  FakeModelOptions fo;
  fo.defect = defect;
  fo.window = 8;
  fo.ratio = 4;
  fo.max_rollback = 40;  // lets copy_prefix truncate a donor instead of replaying it
  EngineCoreOptions o = small_batches();
  o.prefix_cache_entries = 4;
  std::mt19937 rng(11);
  GenerationRequest donor;
  for (int i = 0; i < 40; ++i) donor.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % 60));
  donor.sampling.temperature = 0.0f;
  donor.stop.max_tokens = 6;
  donor.stop.ignore_eos = true;
  *n_differing = 0;
  *n_hits = 0;
  for (int m = 8; m <= 40; ++m) {
    GenerationRequest r = donor;
    r.prompt_ids.resize(static_cast<size_t>(m));
    for (int j = 0; j < 5; ++j) r.prompt_ids.push_back(2 + static_cast<int32_t>((m * 13 + j * 7) % 60));
    r.stop.max_tokens = 10;
    FakeModelRunner cold_runner(fo);
    const Outcome cold = run_core(cold_runner, o, {r})[0];
    FakeModelRunner runner(fo);
    EngineCore core(&runner, nullptr, o);
    Outcome warm;
    ASSERT_TRUE(core.add(1, donor, [](const GenerationUpdate&) {}).is_ok());
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    ASSERT_EQ(core.prefix_cache_size(), 1);
    ASSERT_TRUE(core.add(2, r, [&](const GenerationUpdate& u) {
                      for (const auto& e : u.tokens) warm.tokens.push_back(e.token);
                      if (u.finish != FinishReason::kNone) warm.finish = u.finish;
                    }).is_ok());
    const int64_t hit_tokens_before = core.stats().prefix_hit_tokens;
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    const int64_t hit = core.stats().prefix_hit_tokens - hit_tokens_before;
    if (m >= o.block_tokens) {
      EXPECT_GE(hit, m) << "m=" << m;  // the whole shared prefix (and maybe a suffix token) is reused
      ++*n_hits;
    }
    *n_differing += !(warm.tokens == cold.tokens && warm.finish == cold.finish);
    if (defect == Defect::kNone) {
      EXPECT_EQ(warm.tokens, cold.tokens) << "m=" << m;
    }
    core.clear_prefix_cache();
    EXPECT_EQ(core.pool().free_count(), core.pool().total());
    EXPECT_EQ(runner.live_sequences(), 0);
  }
}

TEST(RuntimeEngineCore, PrefixCacheHitEqualsColdAtEveryOffset) {
  int differing = 0, hits = 0;
  check_prefix_hits(Defect::kNone, &differing, &hits);
  EXPECT_EQ(differing, 0);
  EXPECT_EQ(hits, 33);
  check_prefix_hits(Defect::kForgetfulCopy, &differing, &hits);  // negative control
  EXPECT_GT(differing, 20);
}

TEST(RuntimeEngineCore, CancellationAtAnyPointReturnsEveryBlock) {
  FakeModelOptions fo;
  EngineCoreOptions o = small_batches();
  o.speculative_k = 2;
  o.max_running = 6;
  o.prefix_cache_entries = 3;
  FakeModelRunner runner(fo);
  EngineCore core(&runner, nullptr, o);
  const int32_t baseline = core.pool().free_count();
  std::mt19937 rng(5);
  int cancelled = 0;
  RequestId next = 1;
  std::vector<RequestId> live;
  std::vector<FinishReason> finish(2001, FinishReason::kNone);
  for (int round = 0; round < 1000; ++round) {
    auto reqs = make_requests(round, 1, fo.vocab_size, true);
    const RequestId id = next++;
    ASSERT_TRUE(core.add(id, reqs[0], [&finish, id](const GenerationUpdate& u) {
                      if (u.finish != FinishReason::kNone) finish[id] = u.finish;
                    }).is_ok());
    live.push_back(id);
    const int steps = static_cast<int>(rng() % 4);
    for (int s = 0; s < steps && core.has_work(); ++s) ASSERT_TRUE(core.step().is_ok());
    // Cancel a random live request: queued, mid-prefill, mid-decode or mid-speculation.
    const size_t pick = rng() % live.size();
    core.cancel(live[pick]);
    if (finish[live[pick]] == FinishReason::kCancelled) ++cancelled;
    live.erase(live.begin() + static_cast<ptrdiff_t>(pick));
    std::erase_if(live, [&](RequestId r) { return finish[r] != FinishReason::kNone; });
  }
  while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
  EXPECT_GT(cancelled, 500);
  for (RequestId id = 1; id < next; ++id) EXPECT_NE(finish[id], FinishReason::kNone) << id;
  core.clear_prefix_cache();
  EXPECT_EQ(core.pool().free_count(), baseline);
  EXPECT_EQ(runner.live_sequences(), 0);
}

TEST(RuntimeEngineCore, PreemptionByRecomputeIsExactAndReturnsThePool) {
  FakeModelOptions fo;
  const auto reqs = make_requests(8, 16, fo.vocab_size, true);
  for (int32_t k : {0, 2}) {
    EngineCoreOptions o = small_batches();
    o.speculative_k = k;
    const auto alone = run_alone(fo, o, reqs);
    o.pool_blocks = 40;  // far less than 16 requests need at once
    FakeModelRunner runner(fo);
    EngineCore core(&runner, nullptr, o);
    std::vector<Outcome> out(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(core.add(i + 1, reqs[i], [&out, i](const GenerationUpdate& u) {
                        for (const auto& e : u.tokens) out[i].tokens.push_back(e.token);
                        if (u.finish != FinishReason::kNone) {
                          out[i].finish = u.finish;
                          out[i].completion_tokens = u.completion_tokens;
                        }
                      }).is_ok());
    }
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    EXPECT_GT(core.stats().preemptions, 0) << "k=" << k;
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(out[i], alone[i]) << "k=" << k << " request " << i;
    EXPECT_EQ(core.pool().free_count(), 40);
    EXPECT_EQ(runner.live_sequences(), 0);
  }
}

TEST(RuntimeEngineCore, StopsEosMaxTokensAndText) {
  FakeModelOptions fo;
  FakeDetokenizer detok(fo.vocab_size);
  GenerationRequest base;
  base.prompt_ids = {5, 6, 7, 8, 9};
  base.sampling.temperature = 0.0f;
  base.stop.max_tokens = 40;
  base.stop.ignore_eos = true;
  FakeModelRunner r0(fo);
  const Outcome full = run_core(r0, small_batches(), {base}, &detok)[0];
  ASSERT_EQ(full.tokens.size(), 40u);
  EXPECT_EQ(full.finish, FinishReason::kLength);
  EXPECT_EQ(full.text, detok.decode(full.tokens));

  // A stop token id at the position of the 10th generated token ends generation there.
  GenerationRequest r = base;
  r.stop.stop_token_ids = {full.tokens[9]};
  size_t first = 0;
  while (full.tokens[first] != full.tokens[9]) ++first;
  FakeModelRunner r1(fo);
  Outcome o = run_core(r1, small_batches(), {r}, &detok)[0];
  EXPECT_EQ(o.finish, FinishReason::kStop);
  EXPECT_EQ(o.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first + 1));
  EXPECT_EQ(o.completion_tokens, static_cast<int32_t>(first + 1));

  // A stop string spanning tokens 3..5 of the output: the text stops right before it.
  const std::string text = full.text;
  const std::string piece3 = detok.piece(full.tokens[3]), piece4 = detok.piece(full.tokens[4]);
  const std::string stop = piece3.substr(piece3.size() / 2) + piece4 + detok.piece(full.tokens[5]).substr(0, 1);
  r = base;
  r.stop.stop_strings = {stop};
  FakeModelRunner r2(fo);
  o = run_core(r2, small_batches(), {r}, &detok)[0];
  EXPECT_EQ(o.finish, FinishReason::kStop);
  EXPECT_EQ(o.text, text.substr(0, text.find(stop)));
  EXPECT_LE(o.tokens.size(), 6u);

  // EOS ends a request that does not ignore it; max_tokens ends one that never meets EOS.
  r = base;
  r.stop.ignore_eos = false;
  r.stop.max_tokens = 40;
  FakeModelOptions eos_opts = fo;
  eos_opts.eos_token_id = full.tokens[7];
  size_t eos_at = 0;
  while (full.tokens[eos_at] != full.tokens[7]) ++eos_at;
  FakeModelRunner r3(eos_opts);
  o = run_core(r3, small_batches(), {r}, &detok)[0];
  EXPECT_EQ(o.finish, FinishReason::kStop);
  EXPECT_EQ(o.tokens.size(), eos_at + 1);
}

TEST(RuntimeEngineCore, ValidationAndLogprobs) {
  FakeModelOptions fo;
  fo.context_size = 100;
  FakeModelRunner runner(fo);
  EngineCore core(&runner, nullptr, small_batches());
  GenerationRequest r;
  EXPECT_EQ(core.validate(r).rule(), "request.empty_prompt");
  r.prompt_ids = {3, 64};
  EXPECT_EQ(core.validate(r).rule(), "request.token_out_of_vocab");
  r.prompt_ids = std::vector<int32_t>(60, 3);
  r.stop.max_tokens = 41;
  EXPECT_EQ(core.validate(r).code(), StatusCode::kOutOfRange);
  r.stop.max_tokens = 40;
  EXPECT_TRUE(core.validate(r).is_ok());
  r.sampling.top_p = 0.0f;
  EXPECT_EQ(core.validate(r).rule(), "request.bad_sampling");
  r.sampling.top_p = 1.0f;
  r.stop.stop_strings = {"end"};  // no detokenizer: said explicitly, never silently ignored
  EXPECT_EQ(core.validate(r).rule(), "request.stop_strings_need_tokenizer");
  r.stop.stop_strings.clear();
  EngineCoreOptions tiny = small_batches();
  tiny.pool_blocks = 4;
  EngineCore small(&runner, nullptr, tiny);
  EXPECT_EQ(small.validate(r).rule(), "request.exceeds_pool");

  r.prompt_ids = {4, 5, 6};
  r.stop.max_tokens = 3;
  r.sampling.temperature = 0.0f;
  r.sampling.top_logprobs = 2;
  std::vector<TokenEvent> events;
  ASSERT_TRUE(core.add(1, r, [&](const GenerationUpdate& u) {
                    for (const auto& e : u.tokens) events.push_back(e);
                  }).is_ok());
  while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
  ASSERT_EQ(events.size(), 3u);
  for (const TokenEvent& e : events) {
    ASSERT_TRUE(e.logprob.has_value());
    ASSERT_EQ(e.top_logprobs.size(), 2u);
    EXPECT_EQ(e.top_logprobs[0].token, e.token);  // greedy picks the most likely token
    EXPECT_FLOAT_EQ(e.top_logprobs[0].logprob, e.logprob->logprob);
    EXPECT_GE(e.top_logprobs[0].logprob, e.top_logprobs[1].logprob);
    EXPECT_LT(e.logprob->logprob, 0.0f);
  }
}

}  // namespace
}  // namespace dsv4
