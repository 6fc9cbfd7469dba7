// tests/model: the cpu backend against the reference backend on the tiny golden checkpoint — bit-identical
// logits with the scalar kernels (they accumulate in double exactly like ref::linear), independence of
// the thread count and of the pool's schedule, and batch invariance (a sequence's logits do not depend on the other rows): always
// without AMX; with AMX while every weight takes one path (kernels::AmxRouting: by default dense
// projections always on AMX, routed experts on it only from 16 rows, so batches under 16 rows).
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "model/model.h"
#include "golden_case.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

std::filesystem::path checkpoint() { return shared_dir() / "golden/tiny/checkpoint"; }

std::unique_ptr<Model> load(Backend b, kernels::Isa isa, int threads) {
  ModelOptions o;
  o.backend = b;
  o.isa = isa;
  o.threads = threads;
  auto m = Model::load(checkpoint(), o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// Prefill `prefill` ids in one forward (≥ 16 rows: the AMX path where present), then decode the rest one
// at a time; every position's logits, plus the MTP logits over the prefill (its own batched path).
std::vector<float> run(const Model& m, const std::vector<int32_t>& ids, size_t prefill) {
  auto seq = m.new_sequence();
  SequenceState* st[] = {seq.get()};
  std::vector<float> all, part;
  ForwardCapture cap;
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < prefill; ++i) batch.push_back({0, static_cast<int32_t>(i), ids[i], true});
  EXPECT_TRUE(m.forward(batch, st, &part, &cap).is_ok());
  all = part;
  std::vector<BatchToken> mtp;
  for (size_t i = 0; i + 1 < prefill; ++i) mtp.push_back({0, static_cast<int32_t>(i), ids[i + 1], true});
  const auto streams = std::span<const float>(cap.final_streams).first(mtp.size() * cap.final_streams.size() / prefill);
  EXPECT_TRUE(m.forward_mtp(mtp, streams, st, &part).is_ok());
  all.insert(all.end(), part.begin(), part.end());
  for (size_t i = prefill; i < ids.size(); ++i) {
    EXPECT_TRUE(m.forward(std::vector<BatchToken>{{0, static_cast<int32_t>(i), ids[i], true}}, st, &part).is_ok());
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CpuBackend, ScalarKernelsAreBitIdenticalToTheReference) {
  const auto ids = golden_tokens(72);  // crosses the window (64) and several compressor blocks
  auto ref = load(Backend::kReference, kernels::Isa::kAuto, 2);
  auto cpu = load(Backend::kCpu, kernels::Isa::kScalar, 2);
  ASSERT_TRUE(ref && cpu);
  const auto a = run(*ref, ids, 40), b = run(*cpu, ids, 40);
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(same_bits(a, b));
}

TEST(CpuBackend, LogitsDoNotDependOnTheThreadCount) {
  const auto ids = golden_tokens(48);
  for (kernels::Isa isa : {kernels::Isa::kAvx512, kernels::Isa::kAuto}) {
    auto one = load(Backend::kCpu, isa, 1), three = load(Backend::kCpu, isa, 3);
    ASSERT_TRUE(one && three);
    EXPECT_EQ(one->threads(), 1);
    EXPECT_EQ(three->threads(), 3);
    EXPECT_TRUE(same_bits(run(*one, ids, 32), run(*three, ids, 32))) << kernels::isa_name(kernels::resolve_isa(isa));
  }
}

// The pool hands chunks out dynamically; forcing uneven schedules (the caller or one worker delayed on
// every chunk) must change no bit of any logit, prefill, MTP or decode.
TEST(CpuBackend, LogitsDoNotDependOnTheSchedule) {
  const auto ids = golden_tokens(40);
  auto one = load(Backend::kCpu, kernels::Isa::kAuto, 1), three = load(Backend::kCpu, kernels::Isa::kAuto, 3);
  ASSERT_TRUE(one && three);
  const auto expected = run(*one, ids, 24);
  ThreadPool* pool = three->context().exec.pool;
  ASSERT_NE(pool, nullptr);
  const ThreadPool::ChunkHook hooks[] = {
      [](int slot, int64_t) {
        if (slot == 0) std::this_thread::sleep_for(std::chrono::microseconds(100));
      },
      [](int slot, int64_t) {
        if (slot == 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
      },
  };
  for (size_t h = 0; h < std::size(hooks); ++h) {
    pool->set_chunk_hook_for_testing(hooks[h]);
    EXPECT_TRUE(same_bits(expected, run(*three, ids, 24))) << "schedule " << h;
  }
  pool->set_chunk_hook_for_testing(nullptr);
}

// Sequence A (prefilled alone, then decoding) gets the same logits whether its decode step runs alone
// or batched with sequence B's prefill chunk of `b_rows` tokens.
void expect_batch_invariant(const Model& m, int32_t b_rows) {
  const auto ids = golden_tokens(60);
  auto a1 = m.new_sequence(), a2 = m.new_sequence(), b = m.new_sequence();
  std::vector<BatchToken> pre;
  for (int32_t i = 0; i < 30; ++i) pre.push_back({0, i, ids[static_cast<size_t>(i)], false});
  std::vector<float> alone, mixed;
  SequenceState* s1[] = {a1.get()};
  SequenceState* s2[] = {a2.get(), b.get()};
  ASSERT_TRUE(m.forward(pre, s1, nullptr).is_ok());
  ASSERT_TRUE(m.forward(pre, std::span<SequenceState* const>(s2, 1), nullptr).is_ok());
  ASSERT_TRUE(m.forward(std::vector<BatchToken>{{0, 30, ids[30], true}}, s1, &alone).is_ok());
  std::vector<BatchToken> batch;
  for (int32_t i = 0; i < b_rows; ++i) batch.push_back({1, i, ids[static_cast<size_t>(30 + i)], true});
  batch.insert(batch.begin() + b_rows / 2, BatchToken{0, 30, ids[30], true});  // A's row in the middle
  ASSERT_TRUE(m.forward(batch, s2, &mixed).is_ok());
  const auto V = static_cast<size_t>(m.config().vocab_size);
  const std::vector<float> a_row(mixed.begin() + static_cast<std::ptrdiff_t>(b_rows / 2 * V),
                                 mixed.begin() + static_cast<std::ptrdiff_t>((b_rows / 2 + 1) * V));
  EXPECT_TRUE(same_bits(alone, a_row)) << "B rows " << b_rows;
}

TEST(CpuBackend, BatchInvariantWithoutAmx) {
  auto m = load(Backend::kCpu, kernels::Isa::kAvx512, 2);
  ASSERT_TRUE(m);
  for (int32_t rows : {3, 24}) expect_batch_invariant(*m, rows);
}

// The VDPBF16PS tier (AVX512_BF16 CPUs without AMX: the FP4 routed experts, the FP8 projections and the
// BF16 linears on the bf16 dot-product tiles, whose guards must never move one row's result to the fallback
// tiles' order; the BF16 tile's guard decides per row and per token), past one 8-token tile too.
TEST(CpuBackend, BatchInvariantOnAvx512Bf16) {
  if (!kernels::isa_supported(kernels::Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  auto m = load(Backend::kCpu, kernels::Isa::kAvx512Bf16, 2);
  ASSERT_TRUE(m);
  for (int32_t rows : {3, 24}) expect_batch_invariant(*m, rows);
}

// The default AMX routing (kernels::AmxRouting): dense projections on AMX at every row count, routed
// experts on the vector tiles below 16 rows. A batch of 15 rows keeps every weight on the path it takes
// for the 1-row step alone.
TEST(CpuBackend, BatchInvariantWithAmxBelowSixteenRows) {
  auto m = load(Backend::kCpu, kernels::Isa::kAuto, 2);
  ASSERT_TRUE(m);
  expect_batch_invariant(*m, 14);  // 15 rows in all: no routed expert call reaches its AMX threshold
}

// Every weight always on AMX (routed experts from 1 row too): every weight takes one path at every batch
// size, so rows are batch-invariant past 16 rows as well.
TEST(CpuBackend, BatchInvariantWithEveryWeightOnAmx) {
  if (!kernels::isa_supported(kernels::Isa::kAmx)) GTEST_SKIP() << "no AMX";
  ModelOptions o;
  o.backend = Backend::kCpu;
  o.isa = kernels::Isa::kAmx;
  o.threads = 2;
  o.amx = {1, 1};
  auto m = Model::load(checkpoint(), o);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  for (int32_t rows : {3, 24}) expect_batch_invariant(**m, rows);
}

TEST(CpuBackend, ReferenceBackendIsBatchInvariant) {
  auto m = load(Backend::kReference, kernels::Isa::kAuto, 2);
  ASSERT_TRUE(m);
  expect_batch_invariant(*m, 24);
}

TEST(ModelOptions, RejectsNegativeThreads) {
  ModelOptions o;
  o.threads = -1;
  auto m = Model::load(checkpoint(), o);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().rule(), "model.threads");
}

}  // namespace
}  // namespace dsv4::test
