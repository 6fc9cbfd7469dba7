// bench: the sparse attention core (kernels/cpu/sparse_attention.h) at V4-Flash's decode shape — 64 heads
// of 512, one query over a CSA layer's list (128 window rows + 512 selected, 10 online-softmax blocks) or
// an HCA layer's at a 4096 context (128 + 32) — on one thread (CPU time per call: the robust measure on a
// shared machine), per ISA.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "kernels/cpu/isa.h"
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

const int kRegistered = [] {
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
