// tests/model: heap allocations in the decode step loop. A counting global operator new (this test
// executable only) measures the allocations of a warm decode step on the tiny golden checkpoint, cpu
// backend: the per-token modules outside the attention state — mHC (pre, post, head collapse), the norms
// and the MoE (routing + grouped experts) — must allocate nothing once their per-thread buffers have seen
// the batch size, on the calling thread and on the pool's workers alike — and so must a whole warm
// decode step (attention, compressors, indexer, state pages, the forward's bookkeeping) that takes no
// fresh state page. And the step scratch a long prefill grew is given back once decode steps follow.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <thread>

#include "core/scratch.h"

#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/mhc.h"
#include "model/model.h"
#include "test_util.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Replacements for the whole test executable: count, then behave like the default (malloc-backed).
// The deletes are noinline: inlined into library code (ScratchVec::shrink_to), GCC pairs their free()
// with the builtin operator new it assumes and warns -Wmismatched-new-delete, a false positive here.
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete[](void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace dsv4::test {
namespace {

std::unique_ptr<Model> load_tiny(int threads) {
  ModelOptions o;
  o.backend = Backend::kCpu;
  o.threads = threads;
  auto m = Model::load(shared_dir() / "golden/tiny/checkpoint", o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// Runs the per-token modules of every layer over n rows of H: hc_pre/hc_post at both sites, the MoE
// sublayer with its ffn_norm, and the head's hc collapse + norm + logits.
void per_token_modules(const Model& m, std::vector<float>& H, const std::vector<int32_t>& tokens, int64_t n,
                       std::vector<float>& scratch, std::vector<float>& logits) {
  const auto& ctx = m.context();
  const auto& c = m.config();
  const int64_t d = c.dim, hc = c.hc_mult;
  float* y = scratch.data();
  float* post = y + n * d;
  float* comb = post + n * hc;
  float* sub = comb + n * hc * hc;
  float* H2 = sub + n * d;
  for (int64_t il = 0; il < c.n_layers; ++il) {
    const BlockWeights& w = m.weights().layers[static_cast<size_t>(il)];
    v4::hc_pre_tokens(ctx, w.hc_ffn, H.data(), n, y, post, comb);
    v4::moe_sublayer(ctx, il, w, y, tokens.data(), n, sub, nullptr, nullptr);
    v4::hc_post_tokens(ctx, sub, H.data(), post, comb, n, H2);
    std::copy_n(H2, n * hc * d, H.data());
  }
  v4::head_logits(ctx, m.weights().hc_head, m.weights().norm, m.weights().head, H.data(), n, logits.data());
}

TEST(StepAllocations, PerTokenModulesAllocateNothingWhenWarm) {
  for (int threads : {1, 2}) {
    auto m = load_tiny(threads);
    ASSERT_TRUE(m);
    const auto& c = m->config();
    for (int64_t n : {1, 4}) {
      std::vector<float> H(static_cast<size_t>(n * c.hc_mult * c.dim));
      for (size_t i = 0; i < H.size(); ++i) H[i] = static_cast<float>((i * 7919) % 97) / 97.0f - 0.5f;
      std::vector<int32_t> tokens(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>(3 + 11 * i);
      std::vector<float> scratch(
          static_cast<size_t>(n * (2 * c.dim + c.hc_mult + c.hc_mult * c.hc_mult + c.hc_mult * c.dim)));
      std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
      per_token_modules(*m, H, tokens, n, scratch, logits);  // warm-up: buffers grow to this n
      const int64_t before = g_allocations.load();
      per_token_modules(*m, H, tokens, n, scratch, logits);
      EXPECT_EQ(g_allocations.load() - before, 0) << "threads " << threads << " rows " << n;
    }
  }
}

// A 4-sequence decode batch on the tiny model (page_rows 64, window 16; ratios 4 (CSA, 4-row partial
// pages), 128 (16-row partial pages, all of the open block held), 8). Steps 0..16 warm up: the per-thread
// scratch grows and every table takes the pages it will hold until position 32. The steps at positions
// 17..31 then take no fresh page (the ratio-4 and ratio-8 partial pages crossed there come back from the
// pool's free list) yet emit entries of every compressor kind, so each must allocate nothing. The cold
// first step is the negative control: the counter must see its allocations (scratch, first pages).
// With 2 threads the pool hands a step's sequences to whichever thread claims them first, so a worker
// that a busy machine kept off every late warm-up step grows its per-thread scratch (compressor entries,
// indexer scores) the first time it does get a late one: once per thread and shape, not per step. The
// whole batch therefore runs twice on the same model (fresh sequences): the second run's warm steps must
// allocate nothing; the first run's count is printed.
TEST(StepAllocations, WarmDecodeStepAllocatesNothing) {
  for (int threads : {1, 2}) {
    auto m = load_tiny(threads);
    ASSERT_TRUE(m);
    constexpr int kSeqs = 4;
    std::vector<float> logits;
    std::vector<BatchToken> batch(kSeqs);  // built once: the harness itself must not allocate per step
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<std::unique_ptr<SequenceState>> seqs;
      std::vector<SequenceState*> states;
      for (int s = 0; s < kSeqs; ++s) {
        seqs.push_back(m->new_sequence());
        states.push_back(seqs.back().get());
      }
      auto step = [&](int t) {
        for (int s = 0; s < kSeqs; ++s) batch[static_cast<size_t>(s)] = {s, t, 5 + 3 * s + t, true};
        const int64_t before = g_allocations.load();
        const Status st = m->forward(batch, states, &logits);
        const int64_t count = g_allocations.load() - before;
        EXPECT_TRUE(st.is_ok()) << st.to_string();
        return count;
      };
      const int64_t cold = step(0);
      EXPECT_GT(cold, 0) << "threads " << threads << ": the counter must see the cold step's allocations";
      for (int t = 1; t <= 16; ++t) step(t);
      int64_t total = 0;
      for (int t = 17; t < 32; ++t) {
        const int64_t count = step(t);
        if (pass == 1 || threads == 1) {
          EXPECT_EQ(count, 0) << "threads " << threads << ", run " << pass + 1 << ", warm step at position " << t;
        }
        total += count;
      }
      std::printf("[allocations] cpu backend, %d threads, %d sequences, run %d: cold step %lld, warm steps 17..31 %lld\n",
                  threads, kSeqs, pass + 1, static_cast<long long>(cold), static_cast<long long>(total));
    }
  }
}

}  // namespace
}  // namespace dsv4::test

namespace dsv4::test {
namespace {

struct TrimRun {
  int64_t decode_only_held = 0;  // a model that only ever decoded: what the decode shapes need
  int64_t buffers = 0;
  int64_t after_prefill = 0, before_trim = 0, after_trim = 0;
  int64_t warm_allocations = -1;  // decode steps after the trim that take no state page
  int64_t held_after_warm = 0;
};

// Decodes one token at a time from position `from` for `steps` steps.
void decode_steps(const Model& m, SequenceState* st, int32_t from, int steps, std::vector<float>* logits) {
  SequenceState* states[] = {st};
  for (int32_t t = from; t < from + steps; ++t)
    ASSERT_TRUE(m.forward(std::vector<BatchToken>{{0, t, 7 + t % 50, true}}, states, logits).is_ok());
}

// Step scratch (core/scratch.h) after a long prefill: the prefill's activation buffers stay through
// kTrimAfterSteps − 1 decode steps (a short dip keeps its memory), then the end of the next step gives
// them back, down to what the decode shapes need — measured on a model that only ever decoded, run on
// its own thread since the buffers are per thread — plus the policy's allowance (twice the ask plus
// kTrimSlackBytes per buffer). And decode steps after the trim allocate nothing again.
TEST(StepAllocations, LongPrefillScratchIsTrimmedToTheDecodeShapes) {
  TrimRun r;
  constexpr int kWarm = 3;
  std::thread decode_only([&] {
    auto m = load_tiny(1);  // one thread: every buffer lives on this thread
    ASSERT_TRUE(m);
    auto seq = m->new_sequence();
    std::vector<float> logits;
    decode_steps(*m, seq.get(), 0, ScratchNode::kTrimAfterSteps + kWarm, &logits);
    r.decode_only_held = scratch_thread_stats().held_bytes;
  });
  decode_only.join();
  std::thread prefill_then_decode([&] {
    auto m = load_tiny(1);
    ASSERT_TRUE(m);
    auto seq = m->new_sequence();
    SequenceState* states[] = {seq.get()};
    constexpr int32_t kPrefill = 512;
    std::vector<BatchToken> batch;
    for (int32_t i = 0; i < kPrefill; ++i) batch.push_back({0, i, 5 + (i * 13) % 90, i + 1 == kPrefill});
    std::vector<float> logits;
    ASSERT_TRUE(m->forward(batch, states, &logits).is_ok());
    r.after_prefill = scratch_thread_stats().held_bytes;
    decode_steps(*m, seq.get(), kPrefill, ScratchNode::kTrimAfterSteps - 1, &logits);
    r.before_trim = scratch_thread_stats().held_bytes;
    decode_steps(*m, seq.get(), kPrefill + ScratchNode::kTrimAfterSteps - 1, 1, &logits);
    const ScratchStats s = scratch_thread_stats();
    r.after_trim = s.held_bytes;
    r.buffers = s.buffers;
    // Room for the next decode step, then one counted.
    decode_steps(*m, seq.get(), kPrefill + ScratchNode::kTrimAfterSteps, kWarm, &logits);
    // Up to position 519 (the end of an 8-row compressor block, which takes a fresh state page); then
    // positions 520..526 lie inside one block: no page, so no allocation at all — no trimmed buffer
    // grows back. The batch is built once: the harness must not allocate either.
    const int32_t first = kPrefill + ScratchNode::kTrimAfterSteps + kWarm;
    ASSERT_EQ(first, 519);
    decode_steps(*m, seq.get(), first, 1, &logits);
    std::vector<BatchToken> one(1);
    const int64_t before = g_allocations.load();
    for (int32_t t = 520; t <= 526; ++t) {
      one[0] = {0, t, 7 + t % 50, true};
      ASSERT_TRUE(m->forward(one, states, &logits).is_ok());
    }
    r.warm_allocations = g_allocations.load() - before;
    r.held_after_warm = scratch_thread_stats().held_bytes;
  });
  prefill_then_decode.join();
  const int64_t bound = 2 * r.decode_only_held + r.buffers * ScratchNode::kTrimSlackBytes;
  std::printf("[scratch] decode-only %lld B, after a 512-token prefill %lld B, after %d decode steps %lld B, "
              "after %d %lld B (bound %lld B, %lld buffers)\n",
              static_cast<long long>(r.decode_only_held), static_cast<long long>(r.after_prefill),
              ScratchNode::kTrimAfterSteps - 1, static_cast<long long>(r.before_trim), ScratchNode::kTrimAfterSteps,
              static_cast<long long>(r.after_trim), static_cast<long long>(bound), static_cast<long long>(r.buffers));
  EXPECT_GT(r.after_prefill, bound) << "the prefill must hold more than the bound, or the test proves nothing";
  EXPECT_GE(r.before_trim, r.after_prefill) << "trimmed before kTrimAfterSteps oversized steps";
  EXPECT_LE(r.after_trim, bound);
  EXPECT_EQ(r.warm_allocations, 0);
  EXPECT_EQ(r.held_after_warm, r.after_trim);
}

}  // namespace
}  // namespace dsv4::test
