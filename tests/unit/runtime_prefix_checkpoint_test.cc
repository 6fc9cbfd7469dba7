// unit: prefix reuse from checkpoints and the engine's byte budget on the real forward pass (the tiny
// golden checkpoint: window 16, compression ratios 4, 128 and 8, an MTP layer). A prefix copy ending at
// any offset inside a window or a compression block == a cold run, bit for bit, while replaying fewer
// tokens than one checkpoint interval (without checkpoints the whole prefix is replayed); a budget that
// holds only some sequences finishes every request with the unbudgeted tokens and returns every page.
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/engine_core.h"
#include "runtime/model_model_runner.h"
#include "runtime_tiny_model.h"
#include "test_util.h"

namespace dsv4 {
namespace {

using test::greedy;
using test::prompt_of;

// Its own runner (batch-invariant kernels, see runtime_tiny_model.h): these tests switch checkpoints and
// budgets, which the runner keeps.
ModelModelRunner& tiny() {
  static std::unique_ptr<ModelModelRunner> runner = test::load_tiny_runner();
  return *runner;
}

// Feeds tokens[length(seq) .. to) in chunks of `chunk`; returns the logits of the last kTail positions
// (when they are fed in the last chunk).
constexpr int32_t kTail = 5;
std::vector<float> feed(ModelRunner& runner, SeqSlot seq, const std::vector<int32_t>& tokens, int32_t to, int32_t chunk) {
  std::vector<float> logits;
  while (runner.length(seq) < to) {
    const int32_t from = runner.length(seq), end = std::min(to, from + chunk);
    std::vector<RunnerToken> batch;
    for (int32_t i = from; i < end; ++i) batch.push_back({seq, i, tokens[static_cast<size_t>(i)], end == to && i >= to - kTail});
    EXPECT_TRUE(runner.forward(batch, &logits).is_ok());
  }
  return logits;
}

constexpr int32_t kInterval = 128;  // lcm(window 16, ratios 4, 128, 8)
constexpr int32_t kDonorLen = kInterval + 40;

// For each hit length L: copy the donor's first L tokens, feed a tail of its own, and compare the tail's
// logits with a cold sequence fed the same tokens. Returns the tokens replayed by each copy.
std::vector<int64_t> hits_vs_cold(bool checkpoints, const std::vector<int32_t>& lengths) {
  ModelModelRunner& runner = tiny();
  const std::vector<int32_t> donor_tokens = prompt_of(kDonorLen, 3);
  // Cold runs first, with checkpoints off (they must not depend on how the runner splits a forward):
  // one sequence that is never copied grows through the lengths in increasing order; at each it takes
  // the tail, then rolls the tail back (an exact truncate, within max_rollback).
  runner.keep_checkpoints(false);
  std::vector<int32_t> order(lengths.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return lengths[a] < lengths[b]; });
  std::vector<std::vector<float>> cold(lengths.size());
  const SeqSlot c = *runner.create_sequence();
  for (int32_t i : order) {
    const int32_t len = lengths[static_cast<size_t>(i)];
    std::vector<int32_t> t(donor_tokens.begin(), donor_tokens.begin() + len);
    for (int j = 0; j < kTail; ++j) t.push_back(500 + len + j);
    feed(runner, c, t, len, 1000);
    cold[static_cast<size_t>(i)] = feed(runner, c, t, len + kTail, 1000);
    EXPECT_TRUE(runner.truncate(c, len).is_ok());
  }
  runner.free_sequence(c);
  runner.set_checkpoint_interval(kInterval);
  runner.keep_checkpoints(checkpoints);
  EXPECT_EQ(runner.info().checkpoint_interval, checkpoints ? kInterval : 0);
  const SeqSlot donor = *runner.create_sequence();
  feed(runner, donor, donor_tokens, kDonorLen - 1, 50);  // chunks that straddle the checkpoints
  feed(runner, donor, donor_tokens, kDonorLen, 1);       // the last forward: one token
  EXPECT_EQ(runner.checkpoints_held(), checkpoints ? 1 : 0);
  std::vector<int64_t> replayed;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const int32_t len = lengths[i];
    std::vector<int32_t> t(donor_tokens.begin(), donor_tokens.begin() + len);
    for (int j = 0; j < kTail; ++j) t.push_back(500 + len + j);
    const SeqSlot s = *runner.create_sequence();
    const int64_t before = runner.replayed_tokens();
    EXPECT_TRUE(runner.copy_prefix(s, donor, len).is_ok());
    replayed.push_back(runner.replayed_tokens() - before);
    EXPECT_EQ(runner.length(s), len);
    const std::vector<float> warm = feed(runner, s, t, len + kTail, 1000);
    EXPECT_EQ(warm.size(), cold[i].size());
    EXPECT_TRUE(warm == cold[i]) << "hit of " << len << " tokens differs from cold";
    runner.free_sequence(s);
  }
  runner.free_sequence(donor);
  EXPECT_EQ(runner.checkpoints_held(), 0);
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  runner.keep_checkpoints(false);
  return replayed;
}

TEST(RuntimePrefixCheckpoint, HitsAtEveryOffsetOfAWindowAndCompressionBlockEqualColdWithBoundedReplay) {
  // Every offset of a window (16) and of the r=4 / r=8 blocks, on both sides of the checkpoint, plus
  // offsets inside the r=128 block before it and after it.
  std::vector<int32_t> lengths = {1, 3, 57, 127, 150, 160};
  for (int32_t len = kInterval - 1; len <= kInterval + 16; ++len) lengths.push_back(len);
  const std::vector<int64_t> replayed = hits_vs_cold(true, lengths);
  for (size_t i = 0; i < lengths.size(); ++i) {
    EXPECT_LT(replayed[i], kInterval) << "len " << lengths[i];
    EXPECT_EQ(replayed[i], lengths[i] % kInterval) << "len " << lengths[i];  // from the nearest checkpoint
  }
}

TEST(RuntimePrefixCheckpoint, NegativeControlWithoutCheckpointsTheWholePrefixIsReplayed) {
  const std::vector<int32_t> lengths = {129, 150, 160};
  const std::vector<int64_t> replayed = hits_vs_cold(false, lengths);
  for (size_t i = 0; i < lengths.size(); ++i) EXPECT_EQ(replayed[i], lengths[i]);
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  CoreStats stats;
  int64_t peak_state_bytes = 0;  // every kind of state page (what the runner's budget binds)
};

Outcome run(ModelModelRunner& runner, const EngineCoreOptions& opt, const std::vector<GenerationRequest>& reqs) {
  Outcome out;
  {
    EngineCore core(&runner, nullptr, opt);
    out.tokens.resize(reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(core.add(i + 1, reqs[i], [&out, i](const GenerationUpdate& u) {
                        EXPECT_NE(u.finish, FinishReason::kError) << u.error.to_string();
                        for (const auto& e : u.tokens) out.tokens[i].push_back(e.token);
                      }).is_ok());
    }
    while (core.has_work()) {
      EXPECT_TRUE(core.step().is_ok());
      out.peak_state_bytes = std::max(out.peak_state_bytes, runner.memory().bytes_in_use());
    }
    out.stats = core.stats();
    core.clear_prefix_cache();
    EXPECT_EQ(core.pool().free_count(), core.pool().total());
  }
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  EXPECT_EQ(runner.checkpoints_held(), 0);
  return out;
}

EngineCoreOptions options() {
  EngineCoreOptions o;
  o.max_batch_tokens = 64;
  o.block_tokens = 8;
  o.pool_blocks = 1 << 16;
  return o;
}

TEST(RuntimePrefixCheckpoint, EngineSharedSystemPromptHitsReplayLessThanAnInterval) {
  ModelModelRunner& runner = tiny();
  runner.set_checkpoint_interval(kInterval);
  const std::vector<int32_t> system = prompt_of(kInterval + 21, 8);
  std::vector<GenerationRequest> reqs;
  for (int q = 0; q < 3; ++q) {
    std::vector<int32_t> p = system;
    for (int j = 0; j < 3 + 4 * q; ++j) p.push_back(600 + 10 * q + j);
    reqs.push_back(greedy(p, 4));
  }
  std::vector<std::vector<int32_t>> cold;
  for (const auto& r : reqs) cold.push_back(run(runner, options(), {r}).tokens[0]);
  EngineCoreOptions o = options();
  o.prefix_cache_entries = 4;
  o.max_running = 1;  // one after another: each later request hits the earlier ones' cached state
  const int64_t before = runner.prefix_replayed_tokens();
  const Outcome warm = run(runner, o, reqs);
  EXPECT_EQ(warm.tokens, cold);
  EXPECT_EQ(warm.stats.prefix_hits, 2);
  EXPECT_GE(warm.stats.prefix_hit_tokens, 2 * static_cast<int64_t>(system.size()));
  EXPECT_EQ(runner.prefix_replayed_tokens() - before, 2 * 21);  // from the checkpoint at 128, not from 0
  runner.keep_checkpoints(false);
}

TEST(RuntimePrefixCheckpoint, AStateBudgetThatHoldsSomeSequencesFinishesAllWithTheSameTokens) {
  ModelModelRunner& runner = tiny();
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(greedy(prompt_of(30 + 13 * i, 20 + i), 5));
  const Outcome free_run = run(runner, options(), reqs);
  // Only the runner bound (admission unbounded): forwards are refused, sequences preempted and retried.
  // The budget (all state pages: window, partial blocks, rows, keys) holds about two of the longest
  // request at its peak, less than the four at once.
  const int64_t budget = 2 * run(runner, options(), {reqs.back()}).peak_state_bytes;
  EngineCoreOptions o = options();
  o.runner_budget_bytes = budget;
  const Outcome refused = run(runner, o, reqs);
  EXPECT_EQ(refused.tokens, free_run.tokens);
  EXPECT_GT(refused.stats.forward_retries, 0);
  EXPECT_LE(refused.peak_state_bytes, budget);
  EXPECT_GT(free_run.peak_state_bytes, budget);  // unbounded, the same requests hold more
  // pool_bytes binds both admission and the runner; with speculation, rollbacks under the budget too.
  o = options();
  o.pool_blocks = 0;
  const auto plan = plan_pool(runner.info().footprint, int64_t{1} << 30, o.block_tokens);
  ASSERT_TRUE(plan.is_ok());
  o.pool_bytes = (plan->blocks_for(75) + plan->blocks_for(50)) * plan->block_bytes;
  o.speculative_k = 2;
  const Outcome planned = run(runner, o, reqs);
  EXPECT_EQ(planned.tokens, free_run.tokens);
  EXPECT_GT(planned.stats.preemptions, 0);
  EXPECT_LE(planned.peak_state_bytes, o.pool_bytes);
  // Left unbounded for the other tests of this runner.
  ASSERT_TRUE(runner.set_state_budget(0).is_ok());
}

}  // namespace
}  // namespace dsv4
