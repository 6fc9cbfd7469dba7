// bench: the sparse attention core (kernels/cpu/sparse_attention.h) at V4-Flash's decode shape — 64 heads
// of 512, one query over a CSA layer's list (128 window rows + 512 selected, 10 online-softmax blocks) or
// an HCA layer's at a 4096 context (128 + 32) — on one thread (CPU time per call: the robust measure on a
// shared machine), per ISA. Beside it the lightning indexer's scores (kernels/cpu/indexer.h) at V4-Flash's
// 64 index heads of 128 over the compressed keys of a 4K and a 64K context (ratio 4: 1024 and 16384 keys),
// FP4-simulated as in the model (fp32 keys, and stored packed as the model holds them), also on one thread;
// and the decode of the FP8-stored rows one CSA query reads (kernels/cpu/kv_row_decode.h).
#include <benchmark/benchmark.h>

#include <span>
#include <string>
#include <vector>

#include "core/kv_row.h"
#include "core/quant.h"
#include "kernels/cpu/indexer.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/kv_row_decode.h"
#include "kernels/cpu/sparse_attention.h"

namespace {

using dsv4::kernels::Isa;

constexpr int64_t kHeads = 64, kDim = 512;

std::vector<float> pseudo_random(int64_t n, uint32_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = scale * static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001 - 1000) / 1000.0f;
  }
  return v;
}

void attention_case(benchmark::State& state, Isa isa, int64_t n_idx) {
  const auto q = pseudo_random(kHeads * kDim, 1, 1.0f);
  const auto kv = pseudo_random(n_idx * kDim, 2, 1.0f);
  const auto sink = pseudo_random(kHeads, 3, 1.0f);
  std::vector<const float*> rows(static_cast<size_t>(n_idx));
  for (int64_t j = 0; j < n_idx; ++j) rows[static_cast<size_t>(j)] = kv.data() + j * kDim;
  std::vector<float> out(static_cast<size_t>(kHeads * kDim));
  dsv4::kernels::SparseAttentionScratch scratch;
  const dsv4::kernels::SparseAttentionShape shape{kHeads, kDim, 1.0f / 22.627417f};
  for (auto _ : state) {
    dsv4::kernels::sparse_attention(shape, q.data(), rows.data(), n_idx, sink.data(), out.data(), scratch,
                                    {isa, nullptr});
    benchmark::DoNotOptimize(out.data());
  }
}

void indexer_case(benchmark::State& state, Isa isa, int64_t n_keys) {
  constexpr int64_t kIndexHeads = 64, kIndexDim = 128;
  auto q = pseudo_random(kIndexHeads * kIndexDim, 4, 1.0f);
  auto keys = pseudo_random(n_keys * kIndexDim, 5, 1.0f);
  const auto w = pseudo_random(kIndexHeads, 6, 0.1f);
  // What the model feeds: FP4-simulated per 32-block (the scores are then exact on every ISA).
  dsv4::fake_quant_fp4(std::span<float>(q), 32);
  dsv4::fake_quant_fp4(std::span<float>(keys), 32);
  std::vector<float> scores(static_cast<size_t>(n_keys));
  for (auto _ : state) {
    dsv4::kernels::indexer_scores(q.data(), kIndexHeads, kIndexDim, keys.data(), n_keys, w.data(), scores.data(),
                                  {isa, nullptr});
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(kIndexHeads * kIndexDim * n_keys),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The same over keys stored packed (core/kv_row.h index keys, the model's storage: indexer_scores_packed).
void indexer_packed_case(benchmark::State& state, Isa isa, int64_t n_keys, bool prepared_once) {
  constexpr int64_t kIndexHeads = 64, kIndexDim = 128;
  auto q = pseudo_random(kIndexHeads * kIndexDim, 4, 1.0f);
  const auto keys = pseudo_random(n_keys * kIndexDim, 5, 1.0f);
  const auto w = pseudo_random(kIndexHeads, 6, 0.1f);
  dsv4::fake_quant_fp4(std::span<float>(q), 32);
  const int64_t key_bytes = dsv4::index_key_bytes(kIndexDim);
  std::vector<uint8_t> packed(static_cast<size_t>(n_keys * key_bytes));
  std::vector<const uint8_t*> rows(static_cast<size_t>(n_keys));
  for (int64_t j = 0; j < n_keys; ++j) {
    uint8_t* entry = packed.data() + j * key_bytes;
    dsv4::encode_index_key({keys.data() + j * kIndexDim, static_cast<size_t>(kIndexDim)},
                           {entry, static_cast<size_t>(key_bytes)});
    rows[static_cast<size_t>(j)] = entry;
  }
  std::vector<float> scores(static_cast<size_t>(n_keys));
  // prepared_once: the keys converted before the loop (indexer_prepare_packed, as prefill does once per call),
  // so each iteration is one more query's scoring alone.
  std::vector<dsv4::kernels::IndexerKeyLine> lines(
      static_cast<size_t>(prepared_once ? dsv4::kernels::indexer_prepared_lines(n_keys, kIndexDim, isa) : 0));
  if (prepared_once) dsv4::kernels::indexer_prepare_packed(rows.data(), n_keys, kIndexDim, lines.data(), {isa, nullptr});
  for (auto _ : state) {
    if (prepared_once) {
      dsv4::kernels::indexer_scores_prepared(q.data(), kIndexHeads, kIndexDim, rows.data(), lines.data(), n_keys,
                                             n_keys, w.data(), scores.data(), {isa, nullptr});
    } else {
      dsv4::kernels::indexer_scores_packed(q.data(), kIndexHeads, kIndexDim, rows.data(), n_keys, w.data(),
                                           scores.data(), {isa, nullptr});
    }
    benchmark::DoNotOptimize(scores.data());
  }
  state.counters["MAC/s"] = benchmark::Counter(static_cast<double>(kIndexHeads * kIndexDim * n_keys),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The rows a CSA-layer query reads from the FP8 store (kernels/cpu/kv_row_decode.h): the window's 127
// earlier rows and 512 selected compressed rows, picked at random from a 64K context's 16384 entries (9 MB,
// beyond L2, as in the model).
void decode_rows_case(benchmark::State& state, Isa isa) {
  const dsv4::KvRowLayout layout{kDim, 64};
  constexpr int64_t kStored = 16384, kRead = 127 + 512;
  const int64_t rb = layout.bytes();
  std::vector<uint8_t> stored(static_cast<size_t>(kStored * rb));
  const std::vector<float> rows = pseudo_random(kStored * kDim, 7, 1.0f);
  for (int64_t t = 0; t < kStored; ++t)
    dsv4::encode_kv_row(layout, {rows.data() + t * kDim, static_cast<size_t>(kDim)},
                        {stored.data() + t * rb, static_cast<size_t>(rb)});
  std::vector<const uint8_t*> read(static_cast<size_t>(kRead));
  uint32_t seed = 3;
  for (auto& p : read) {
    seed = seed * 1664525u + 1013904223u;
    p = stored.data() + static_cast<int64_t>(seed % kStored) * rb;
  }
  std::vector<float> out(static_cast<size_t>(kRead * kDim));
  for (auto _ : state) {
    dsv4::kernels::decode_kv_rows(layout, read.data(), kRead, out.data(), isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["rows/s"] =
      benchmark::Counter(static_cast<double>(kRead), benchmark::Counter::kIsIterationInvariantRate);
}

const int kRegistered = [] {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    benchmark::RegisterBenchmark((std::string("decode_kv_rows/") + dsv4::kernels::isa_name(isa) + "/rows=639").c_str(),
                                 [=](benchmark::State& s) { decode_rows_case(s, isa); });
  }
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int64_t n_keys : {1024, 16384})
      benchmark::RegisterBenchmark((std::string("indexer_scores/") + dsv4::kernels::isa_name(isa) +
                                    "/heads=64x128/keys=" + std::to_string(n_keys))
                                       .c_str(),
                                   [=](benchmark::State& s) { indexer_case(s, isa, n_keys); });
    for (int64_t n_keys : {1024, 16384})
      benchmark::RegisterBenchmark((std::string("indexer_scores_packed/") + dsv4::kernels::isa_name(isa) +
                                    "/heads=64x128/keys=" + std::to_string(n_keys))
                                       .c_str(),
                                   [=](benchmark::State& s) { indexer_packed_case(s, isa, n_keys, false); });
    if (dsv4::kernels::indexer_prepared_lines(1, 128, isa) > 0)
      for (int64_t n_keys : {1024, 16384})
        benchmark::RegisterBenchmark((std::string("indexer_scores_prepared/") + dsv4::kernels::isa_name(isa) +
                                      "/heads=64x128/keys=" + std::to_string(n_keys))
                                         .c_str(),
                                     [=](benchmark::State& s) { indexer_packed_case(s, isa, n_keys, true); });
  }
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int64_t n_idx : {160, 640})
      benchmark::RegisterBenchmark((std::string("sparse_attention/") + dsv4::kernels::isa_name(isa) +
                                    "/heads=64x512/rows=" + std::to_string(n_idx))
                                       .c_str(),
                                   [=](benchmark::State& s) { attention_case(s, isa, n_idx); });
  }
  return 0;
}();

}  // namespace
