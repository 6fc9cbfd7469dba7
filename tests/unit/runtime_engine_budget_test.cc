// unit: the engine's byte budget against the fake model's own memory. The oracle is the same request run
// alone with no budget: a budget that holds only some sequences (in admission's plan, or only in the
// runner, which then refuses forwards) must still finish every request with the same tokens, never hold
// more than the budget, and give every byte back.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "runtime/engine_core.h"
#include "runtime/testing/fake_model_runner.h"
#include "runtime_tiny_model.h"  // greedy()

namespace dsv4 {
namespace {

using testing::FakeModelOptions;
using testing::FakeModelRunner;
using test::greedy;

struct Result_ {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<FinishReason> finish;
  std::vector<Status> errors;
  int64_t peak_state_bytes = 0;
  CoreStats stats;
};

Result_ run(FakeModelRunner& runner, const EngineCoreOptions& opt, const std::vector<GenerationRequest>& reqs) {
  EngineCore core(&runner, nullptr, opt);
  Result_ out;
  out.tokens.resize(reqs.size());
  out.finish.assign(reqs.size(), FinishReason::kNone);
  out.errors.resize(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(core.add(i + 1, reqs[i], [&out, i](const GenerationUpdate& u) {
                      for (const auto& e : u.tokens) out.tokens[i].push_back(e.token);
                      if (u.finish != FinishReason::kNone) {
                        out.finish[i] = u.finish;
                        out.errors[i] = u.error;
                      }
                    }).is_ok());
  }
  for (int64_t steps = 0; core.has_work() && steps < 100000; ++steps) {
    (void)core.step();  // a failed batch is reported on its requests' updates
    out.peak_state_bytes = std::max(out.peak_state_bytes, runner.state_bytes());
  }
  EXPECT_FALSE(core.has_work()) << "no progress";
  out.stats = core.stats();
  core.clear_prefix_cache();
  EXPECT_EQ(core.pool().free_count(), core.pool().total());
  EXPECT_EQ(runner.live_sequences(), 0);
  EXPECT_EQ(runner.state_bytes(), 0);
  return out;
}

std::vector<GenerationRequest> requests(uint32_t seed, int n, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const int len = 1 + static_cast<int>(rng() % 60);
    for (int j = 0; j < len; ++j) r.prompt_ids.push_back(2 + static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab - 2)));
    r.sampling.temperature = i % 3 == 1 ? 0.8f : 0.0f;
    r.sampling.seed = 100 + static_cast<uint64_t>(i);
    r.stop.max_tokens = 4 + static_cast<int32_t>(rng() % 20);
    r.stop.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

EngineCoreOptions options(int32_t k) {
  EngineCoreOptions o;
  o.max_batch_tokens = 48;
  o.max_running = 16;
  o.block_tokens = 8;
  o.pool_blocks = 4096;  // admission unbounded unless a test says otherwise
  o.speculative_k = k;
  return o;
}

std::vector<std::vector<int32_t>> alone(const FakeModelOptions& fo, const EngineCoreOptions& o,
                                        const std::vector<GenerationRequest>& reqs) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& r : reqs) {
    FakeModelRunner runner(fo);
    out.push_back(run(runner, o, {r}).tokens[0]);
  }
  return out;
}

// Bytes the fake holds for one sequence of n tokens.
int64_t seq_bytes(const FakeModelRunner& r, int64_t n) { return r.info().footprint.per_seq() + r.info().footprint.per_token() * n; }

TEST(RuntimeEngineBudget, RunnerRefusalsPreemptAndRetryWithIdenticalTokens) {
  FakeModelOptions fo;
  const auto reqs = requests(3, 16, fo.vocab_size);
  for (int32_t k : {0, 2}) {
    const auto want = alone(fo, options(k), reqs);
    FakeModelRunner runner(fo);
    EngineCoreOptions o = options(k);
    o.runner_budget_bytes = 3 * seq_bytes(runner, 90);  // about 3 of the 16 requests at once
    const Result_ got = run(runner, o, reqs);
    EXPECT_EQ(got.tokens, want) << "k=" << k;
    for (FinishReason f : got.finish) EXPECT_EQ(f, FinishReason::kLength);
    EXPECT_GT(runner.refused_forwards(), 0) << "k=" << k;
    EXPECT_EQ(got.stats.forward_retries, runner.refused_forwards());
    EXPECT_GT(got.stats.preemptions, 0);
    EXPECT_LE(got.peak_state_bytes, o.runner_budget_bytes);
  }
}

TEST(RuntimeEngineBudget, PoolBytesBindsTheRunnerAndAdmissionStaysInsideIt) {
  FakeModelOptions fo;
  const auto reqs = requests(11, 16, fo.vocab_size);
  const auto want = alone(fo, options(2), reqs);
  FakeModelRunner runner(fo);
  EngineCoreOptions o = options(2);
  o.pool_blocks = 0;
  o.pool_bytes = 4 * seq_bytes(runner, 90);
  const Result_ got = run(runner, o, reqs);
  EXPECT_EQ(got.tokens, want);
  EXPECT_GT(got.stats.preemptions + got.stats.forward_retries, 0);  // the budget did bind
  EXPECT_LE(got.peak_state_bytes, o.pool_bytes);
  // Admission's plan rounds every sequence up, so it never asks the runner for more than it has.
  EXPECT_EQ(runner.refused_forwards(), 0);
  // Without the runner bound, the same plan runs many more sequences at once.
  FakeModelRunner unbound(fo);
  o.runner_budget_bytes = 0;
  o.pool_bytes = 64 * seq_bytes(runner, 90);
  EXPECT_GT(run(unbound, o, reqs).peak_state_bytes, 4 * seq_bytes(runner, 90));
}

TEST(RuntimeEngineBudget, ARequestThatCannotFitAloneFailsInsteadOfSpinning) {
  FakeModelOptions fo;
  FakeModelRunner runner(fo);
  EngineCoreOptions o = options(0);
  o.runner_budget_bytes = seq_bytes(runner, 10);
  auto reqs = requests(5, 2, fo.vocab_size);
  reqs[0].prompt_ids.assign(40, 7);  // needs more than the budget even alone
  reqs[1].prompt_ids.assign(3, 9);
  reqs[1].stop.max_tokens = 4;
  const Result_ got = run(runner, o, reqs);
  EXPECT_EQ(got.finish[0], FinishReason::kError);
  EXPECT_EQ(got.errors[0].code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(got.finish[1], FinishReason::kLength);  // the small one still runs
  EXPECT_EQ(got.tokens[1], alone(fo, options(0), {reqs[1]})[0]);
}

// Runs one request on `core` to its end; its tokens.
std::vector<int32_t> run_alone_on(EngineCore& core, RequestId id, const GenerationRequest& r) {
  std::vector<int32_t> tokens;
  EXPECT_TRUE(core.add(id, r, [&tokens](const GenerationUpdate& u) {
                    for (const auto& e : u.tokens) tokens.push_back(e.token);
                  }).is_ok());
  for (int64_t steps = 0; core.has_work() && steps < 10000; ++steps) EXPECT_TRUE(core.step().is_ok());
  EXPECT_FALSE(core.has_work()) << "no progress";
  return tokens;
}

// The cached sequences hold the whole budget when a request extending one of them arrives; its copy of
// the shared prefix needs bytes of its own. The hit must evict the least recently used other cached
// sequence to make room, not fall back to a cold prefill (the engine fix of ba80462). Oracles: the
// prefix-hit counters (a miss leaves them unchanged), the fake's refused copies (the budget did bind),
// and the request's tokens from a cold run without a budget.
TEST(RuntimeEngineBudget, PrefixHitEvictsOtherCachedSequencesToMakeRoomForItsCopy) {
  FakeModelOptions fo;
  FakeModelRunner runner(fo);
  EngineCoreOptions o = options(0);
  o.prefix_cache_entries = 4;
  EngineCore core(&runner, nullptr, o);

  std::vector<int32_t> shared(40);
  for (int32_t i = 0; i < 40; ++i) shared[static_cast<size_t>(i)] = 2 + (i * 7) % (fo.vocab_size - 2);
  const std::vector<int32_t> first_out = run_alone_on(core, 1, greedy(shared, 3));
  ASSERT_EQ(first_out.size(), 3u);
  for (int c = 0; c < 3; ++c) {  // three more cached sequences, sharing nothing with `shared`
    std::vector<int32_t> other(30);
    for (int32_t i = 0; i < 30; ++i) other[static_cast<size_t>(i)] = 2 + (c * 13 + i * 5 + 1) % (fo.vocab_size - 2);
    other[0] = shared[0] + 1;
    run_alone_on(core, 2 + c, greedy(other, 3));
  }
  ASSERT_EQ(core.prefix_cache_size(), 4);

  // The extension: `shared`, then a token other than the one the first request generated there, so the
  // hit is exactly the 40 shared tokens.
  std::vector<int32_t> extended = shared;
  extended.push_back(2 + (first_out[0] - 2 + 1) % (fo.vocab_size - 2));
  for (int32_t i = 0; i < 11; ++i) extended.push_back(2 + (i * 3) % (fo.vocab_size - 2));

  // Room for everything cached, the new sequence's fixed state and all but one token of its copy.
  const int64_t per_token = runner.info().footprint.per_token();
  ASSERT_TRUE(runner.set_state_budget(runner.state_bytes() + runner.info().footprint.per_seq() + 40 * per_token - 1)
                  .is_ok());
  const CoreStats before = core.stats();
  const std::vector<int32_t> got = run_alone_on(core, 9, greedy(extended, 6));

  EXPECT_GT(runner.refused_copies(), 0) << "the budget did not bind the copy: the test proves nothing";
  EXPECT_EQ(core.stats().prefix_hits - before.prefix_hits, 1) << "the hit fell back to a cold prefill";
  EXPECT_EQ(core.stats().prefix_hit_tokens - before.prefix_hit_tokens, 40);
  FakeModelRunner cold_runner(fo);
  EngineCore cold(&cold_runner, nullptr, options(0));
  EXPECT_EQ(got, run_alone_on(cold, 1, greedy(extended, 6)));
  core.clear_prefix_cache();
  EXPECT_EQ(runner.state_bytes(), 0);
}

}  // namespace
}  // namespace dsv4
