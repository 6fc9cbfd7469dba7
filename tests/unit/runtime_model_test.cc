// unit: the runtime over the real forward pass (the tiny golden checkpoint, all layer kinds): concurrent
// greedy requests with chunked prefill == each alone; MTP speculation (k = 1, 2) == plain decoding;
// prefix-cache hits ending inside a window / compression block == cold; pools return to baseline.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "runtime/engine_core.h"
#include "runtime/model_model_runner.h"
#include "runtime_tiny_model.h"
#include "test_util.h"

namespace dsv4 {
namespace {

using test::greedy;
using test::prompt_of;

// Loaded once: loading dominates the cost of these tests.
ModelModelRunner& tiny() {
  static std::unique_ptr<ModelModelRunner> runner = test::load_tiny_runner();
  return *runner;
}

std::vector<std::vector<int32_t>> run(ModelRunner& runner, const EngineCoreOptions& opt,
                                      const std::vector<GenerationRequest>& reqs, CoreStats* stats = nullptr) {
  EngineCore core(&runner, nullptr, opt);
  std::vector<std::vector<int32_t>> out(reqs.size());
  for (const auto& r : reqs) EXPECT_TRUE(core.validate(r).is_ok()) << core.validate(r).to_string();
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_TRUE(core.add(i + 1, reqs[i], [&out, i](const GenerationUpdate& u) {
                      for (const auto& e : u.tokens) out[i].push_back(e.token);
                    }).is_ok());
  }
  while (core.has_work()) {
    const Status st = core.step();
    EXPECT_TRUE(st.is_ok()) << st.to_string();
    if (!st.is_ok()) break;
  }
  if (stats != nullptr) *stats = core.stats();
  core.clear_prefix_cache();
  EXPECT_EQ(core.pool().free_count(), core.pool().total());
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);  // every FP8 KV page back in the model's pool
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  EXPECT_EQ(runner.memory().window_bytes_in_use, 0);  // window and partial-block pages too
  EXPECT_EQ(runner.memory().partial_bytes_in_use, 0);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
  return out;
}

EngineCoreOptions options(int32_t k) {
  EngineCoreOptions o;
  o.max_batch_tokens = 24;  // chunked prefill, interleaved with decodes
  o.block_tokens = 8;
  o.pool_blocks = 4096;
  o.speculative_k = k;
  return o;
}

TEST(RuntimeModel, FootprintBoundsTheStateTheModelAllocates) {
  ModelModelRunner& runner = tiny();
  const StateFootprint& f = runner.info().footprint;
  // Window: 7 layers (MTP included) × (ceil(16/64) + 1) pages of 64 FP8 rows of 200 bytes. Partial rows
  // fp32 [kv | score]: r=4 layers L1, L3 two blocks of 4 rows × 2·2·128 floats, their indexers the same;
  // r=128 L2 one block of 128 rows × 2·128 floats, r=8 L4 one block of 8 rows × 2·128 floats.
  EXPECT_EQ(f.window_ring_per_seq, 7 * 2 * 64 * 200);
  EXPECT_EQ(f.compressor_partial_per_seq, 2 * 2 * (8 * 512 * 4) + 128 * 256 * 4 + 8 * 256 * 4);
  // Per token: compressed rows in FP8 (128 dims: 64 E4M3 + 64 BF16 + 1 scale + 7 pad = 200 bytes),
  // r=4 layers L1,L3 a quarter row each, r=128 L2 and r=8 L4 rounded up; indexer keys (L1, L3) packed
  // FP4 (128 dims: 64 + 4 scales = 68 bytes) a quarter key each, rounded up.
  EXPECT_EQ(f.compressed_main_per_token, 2 * 50 + 2 + 25);
  EXPECT_EQ(f.compressed_indexer_per_token, 2 * 17);
  EXPECT_EQ(runner.model().index_pages().row_bytes(), 68);
  EXPECT_EQ(f.kv_page_slack_per_seq, 4 * runner.model().kv_pages().page_bytes() + 2 * runner.model().index_pages().page_bytes());
  // The plan bounds what the pages really hold for one sequence. Its rollback snapshot shares the window
  // and partial pages, and holds on to those the live state has since copied or slid out of (at most
  // as many again); compressed rows and keys it holds only as counts.
  auto seq = runner.create_sequence();
  ASSERT_TRUE(seq.is_ok());
  for (int32_t n : {1, 40, 70, 200}) {
    std::vector<RunnerToken> batch;
    for (int32_t i = runner.length(*seq); i < n; ++i) batch.push_back({*seq, i, 2 + i, false});
    std::vector<float> logits;
    ASSERT_TRUE(runner.forward(batch, &logits).is_ok());
    const int64_t rows = 2 * (n / 4) + n / 128 + n / 8, keys = 2 * (n / 4);
    const RunnerMemory mem = runner.memory();
    EXPECT_GE(mem.kv_bytes_in_use(), rows * 200 + keys * 68) << n;
    EXPECT_LE(mem.kv_bytes_in_use(), f.per_token() * n + f.kv_page_slack_per_seq) << n;
    EXPECT_GT(mem.window_bytes_in_use, 0) << n;
    EXPECT_LE(mem.window_bytes_in_use, 2 * f.window_ring_per_seq) << n;
    EXPECT_LE(mem.partial_bytes_in_use, 2 * f.compressor_partial_per_seq) << n;
  }
  // Drop the snapshot (a truncate to the same length keeps it; a new sequence frees nothing), then
  // the live state alone is within the plan.
  runner.free_sequence(*seq);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
  auto fresh = runner.create_sequence();
  std::vector<RunnerToken> batch;
  for (int32_t i = 0; i < 150; ++i) batch.push_back({*fresh, i, 2 + i, false});
  std::vector<float> logits;
  ASSERT_TRUE(runner.forward(batch, &logits).is_ok());
  const RunnerMemory mem = runner.memory();  // the snapshot of an empty state holds nothing
  EXPECT_LE(mem.window_bytes_in_use, f.window_ring_per_seq);
  EXPECT_LE(mem.partial_bytes_in_use, f.compressor_partial_per_seq);
  EXPECT_LE(mem.bytes_in_use(), f.per_seq() + f.per_token() * 150);
  runner.free_sequence(*fresh);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
}

TEST(RuntimeModel, ConcurrentGreedyAndSpeculationEqualAloneOnTheTinyModel) {
  ModelModelRunner& runner = tiny();
  ASSERT_TRUE(runner.info().has_mtp);
  const std::vector<GenerationRequest> reqs = {greedy(prompt_of(3, 1), 6), greedy(prompt_of(19, 2), 6),
                                               greedy(prompt_of(37, 3), 5), greedy(prompt_of(9, 4), 7)};
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(run(runner, options(0), {r})[0]);
  for (const auto& a : alone) EXPECT_GE(a.size(), 5u);
  EXPECT_EQ(run(runner, options(0), reqs), alone);
  for (int32_t k : {1, 2}) {
    CoreStats st;
    EXPECT_EQ(run(runner, options(k), reqs, &st), alone) << "k=" << k;
    // Position j is only reached when drafts 0..j-1 were accepted; the random-weight MTP head of the
    // tiny checkpoint rarely is, so every verify step exercises rollback (snapshot + replay).
    ASSERT_GE(st.spec.proposed.size(), 1u);
    EXPECT_GE(st.spec.proposed[0], 15);
    for (size_t j = 0; j < st.spec.proposed.size(); ++j) {
      std::printf("[tiny MTP] k=%d draft position %zu: accepted %lld of %lld\n", k, j,
                  static_cast<long long>(st.spec.accepted[j]),
                  static_cast<long long>(st.spec.proposed[j]));
    }
  }
}

TEST(RuntimeModel, PrefixHitsInsideWindowAndCompressionBlocksEqualCold) {
  ModelModelRunner& runner = tiny();
  const std::vector<int32_t> donor_prompt = prompt_of(30, 9);
  EngineCoreOptions o = options(0);
  o.prefix_cache_entries = 2;
  // Hits ending at 17..23: past the window (16) and across the r=4 and r=8 block boundaries.
  for (int m = 17; m <= 23; m += 3) {
    std::vector<int32_t> p(donor_prompt.begin(), donor_prompt.begin() + m);
    for (int j = 0; j < 4; ++j) p.push_back(300 + m * 10 + j);
    const GenerationRequest r = greedy(p, 4);
    const auto cold = run(runner, o, {r})[0];
    EngineCore core(&runner, nullptr, o);
    ASSERT_TRUE(core.add(1, greedy(donor_prompt, 3), [](const GenerationUpdate&) {}).is_ok());
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    std::vector<int32_t> warm;
    ASSERT_TRUE(core.add(2, r, [&](const GenerationUpdate& u) {
                      for (const auto& e : u.tokens) warm.push_back(e.token);
                    }).is_ok());
    while (core.has_work()) ASSERT_TRUE(core.step().is_ok());
    EXPECT_GE(core.stats().prefix_hit_tokens, m) << "m=" << m;
    EXPECT_EQ(warm, cold) << "m=" << m;
    core.clear_prefix_cache();
    EXPECT_EQ(core.pool().free_count(), core.pool().total());
  }
}

std::vector<float> feed(ModelRunner& runner, SeqSlot seq, const std::vector<int32_t>& tokens) {
  std::vector<RunnerToken> batch;
  for (int32_t i = runner.length(seq); i < static_cast<int32_t>(tokens.size()); ++i)
    batch.push_back({seq, i, tokens[static_cast<size_t>(i)], i + 1 == static_cast<int32_t>(tokens.size())});
  std::vector<float> logits;
  EXPECT_TRUE(runner.forward(batch, &logits).is_ok());
  return logits;
}

TEST(RuntimeModel, PrefixCopiesShareKvPagesAndCopyOnWriteIsExact) {
  ModelModelRunner& runner = tiny();
  ASSERT_EQ(runner.memory().kv_pages_in_use, 0);
  const std::vector<int32_t> donor = prompt_of(30, 5);  // r=4 layers 7 rows, r=8 layer 3: one page each
  std::vector<int32_t> longer = donor;
  for (int j = 0; j < 6; ++j) longer.push_back(400 + j);
  const SeqSlot a = *runner.create_sequence();
  feed(runner, a, donor);
  EXPECT_EQ(runner.memory().kv_pages_in_use, 3);
  EXPECT_EQ(runner.memory().index_pages_in_use, 2);  // indexer keys of L1, L3
  const SeqSlot b = *runner.create_sequence();
  const RunnerMemory before = runner.memory();
  ASSERT_TRUE(runner.copy_prefix(b, a, 30).is_ok());
  EXPECT_EQ(runner.memory().kv_pages_in_use, 3);  // shared, not copied
  EXPECT_EQ(runner.memory().index_pages_in_use, 2);
  EXPECT_EQ(runner.memory().window_bytes_in_use, before.window_bytes_in_use);  // window and partials too
  EXPECT_EQ(runner.memory().partial_bytes_in_use, before.partial_bytes_in_use);
  const std::vector<float> warm = feed(runner, b, longer);  // rows into the shared pages: copy-on-write
  EXPECT_EQ(runner.memory().kv_pages_in_use, 6);
  EXPECT_EQ(runner.memory().index_pages_in_use, 4);
  const SeqSlot cold = *runner.create_sequence();
  EXPECT_EQ(feed(runner, cold, longer), warm);
  // The donor's rows were not touched by b's writes: it continues exactly like a fresh run.
  std::vector<int32_t> other = donor;
  other.push_back(777);
  other.push_back(778);
  const std::vector<float> donor_next = feed(runner, a, other);
  const SeqSlot fresh = *runner.create_sequence();
  EXPECT_EQ(feed(runner, fresh, other), donor_next);
  for (SeqSlot s : {a, b, cold, fresh}) runner.free_sequence(s);
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
  EXPECT_GE(runner.memory().kv_pages_held, 6);  // memory kept for reuse, not leaked: nothing in use
}

TEST(RuntimeModel, PreemptionAndCancellationReturnEveryKvPage) {
  ModelModelRunner& runner = tiny();
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy(prompt_of(20 + 9 * i, 20 + i), 6));
  std::vector<std::vector<int32_t>> alone;
  for (const auto& r : reqs) alone.push_back(run(runner, options(0), {r})[0]);
  EngineCoreOptions o = options(0);
  const auto plan = plan_pool(runner.info().footprint, int64_t{1} << 30, o.block_tokens);
  ASSERT_TRUE(plan.is_ok());
  o.pool_blocks = plan->blocks_for(72) + plan->blocks_for(24);  // far less than 6 requests need at once
  CoreStats st;
  EXPECT_EQ(run(runner, o, reqs, &st), alone);  // run() checks the pool and the KV pages are all back
  EXPECT_GT(st.preemptions, 0);

  // Cancellation mid-prefill, mid-decode and mid-speculation.
  EngineCoreOptions oc = options(2);
  oc.prefix_cache_entries = 2;
  EngineCore core(&runner, nullptr, oc);
  for (size_t i = 0; i < reqs.size(); ++i)
    ASSERT_TRUE(core.add(i + 1, reqs[i], [](const GenerationUpdate&) {}).is_ok());
  int64_t peak = 0;
  for (int step = 0; core.has_work(); ++step) {
    ASSERT_TRUE(core.step().is_ok());
    peak = std::max(peak, runner.memory().kv_pages_in_use);
    if (step % 2 == 1 && step / 2 < static_cast<int>(reqs.size())) core.cancel(static_cast<RequestId>(step / 2 + 1));
  }
  EXPECT_GT(peak, 0);
  core.clear_prefix_cache();
  EXPECT_EQ(core.pool().free_count(), core.pool().total());
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);

  // Negative control: a sequence nobody frees keeps its pages, and the checks above would see them.
  const SeqSlot leak = *runner.create_sequence();
  feed(runner, leak, prompt_of(8, 1));
  EXPECT_EQ(runner.memory().kv_pages_in_use, 3);  // r=4 layers L1, L3 and the r=8 layer L4: a page each
  EXPECT_EQ(runner.memory().index_pages_in_use, 2);
  EXPECT_EQ(runner.memory().window_pages_in_use, 7);  // every layer, MTP included
  EXPECT_GT(runner.memory().partial_pages_in_use, 0);
  runner.free_sequence(leak);
  EXPECT_EQ(runner.memory().kv_pages_in_use, 0);
  EXPECT_EQ(runner.memory().index_pages_in_use, 0);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
}

// One byte budget over every pool: a forward that needs more (the main rows or the MTP catch-up after
// them) fails with kResourceExhausted and the sequence is exactly as before — same length, same pages,
// same next logits, and the rollback snapshot of the previous forward still works.
TEST(RuntimeModel, StateBudgetRefusesAForwardAndChangesNothing) {
  ModelModelRunner& runner = tiny();
  const std::vector<int32_t> p = prompt_of(40, 7);
  const SeqSlot ref = *runner.create_sequence();
  const std::vector<float> want = feed(runner, ref, p);
  runner.free_sequence(ref);
  // The first 40 tokens need 246784 bytes of main-model pages (counted in model_kv_pages_test) and the
  // MTP catch-up 39 window rows: one more 64-row page of 200-byte rows.
  const int64_t main_bytes = 246784, mtp_bytes = 64 * 200;
  for (const int64_t budget : {main_bytes - 1, main_bytes + mtp_bytes - 1}) {
    ASSERT_TRUE(runner.set_state_budget(budget).is_ok());
    const SeqSlot s = *runner.create_sequence();
    std::vector<RunnerToken> batch;
    for (int32_t i = 0; i < 40; ++i) batch.push_back({s, i, p[static_cast<size_t>(i)], i == 39});
    std::vector<float> logits;
    const Status st = runner.forward(batch, &logits);
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << budget;
    EXPECT_EQ(runner.length(s), 0);
    EXPECT_EQ(runner.memory().bytes_in_use(), 0) << budget;
    EXPECT_EQ(runner.memory().budget_bytes, budget);
    runner.free_sequence(s);
  }
  ASSERT_TRUE(runner.set_state_budget(main_bytes + mtp_bytes).is_ok());
  const SeqSlot s = *runner.create_sequence();
  EXPECT_EQ(feed(runner, s, p), want);
  EXPECT_EQ(runner.memory().bytes_in_use(), main_bytes + mtp_bytes);
  // Full budget: the next token needs copy-on-write pages (the snapshot shares the last ones).
  std::vector<float> logits;
  const RunnerToken next{s, 40, 9, true};
  EXPECT_EQ(runner.forward({&next, 1}, &logits).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(runner.length(s), 40);
  EXPECT_EQ(runner.memory().bytes_in_use(), main_bytes + mtp_bytes);
  ASSERT_TRUE(runner.set_state_budget(0).is_ok());
  ASSERT_TRUE(runner.forward({&next, 1}, &logits).is_ok());
  ASSERT_TRUE(runner.truncate(s, 40).is_ok());  // the rollback point is still the one before token 40
  std::vector<float> again;
  ASSERT_TRUE(runner.forward({&next, 1}, &again).is_ok());
  EXPECT_EQ(again, logits);
  runner.free_sequence(s);
  EXPECT_EQ(runner.memory().bytes_in_use(), 0);
}

// Window and compressed rows in FP8 pages, keys in FP4: the engine's tokens (chunked prefill, decode,
// concurrency, MTP speculation with rollback) equal an fp32 store's.
TEST(RuntimeModel, Fp8StateGivesTheSameTokensAsAnFp32Store) {
  ModelOptions o;
  o.isa = kernels::Isa::kAvx512;  // as test::load_tiny_runner(): batch-invariant kernels
  auto model = Model::load(test::shared_dir() / "golden/tiny/checkpoint", o);
  ASSERT_TRUE(model.is_ok());
  ASSERT_TRUE((*model)->configure_kv_pages(KvStorage::kF32, 0).is_ok());
  ModelModelRunner f32(std::move(model).value());
  ModelModelRunner& fp8 = tiny();
  const std::vector<GenerationRequest> reqs = {greedy(prompt_of(23, 11), 8), greedy(prompt_of(41, 12), 6),
                                               greedy(prompt_of(5, 13), 9)};
  for (int32_t k : {0, 2}) {
    const auto a = run(fp8, options(k), reqs), b = run(f32, options(k), reqs);
    EXPECT_EQ(a, b) << "k=" << k;
    EXPECT_GE(a[2].size(), 9u);
  }
}

}  // namespace
}  // namespace dsv4
