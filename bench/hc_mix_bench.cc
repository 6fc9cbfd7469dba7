// bench: the mHC mixes (kernels/cpu/hc_mix.h) at V4-Flash's width (hc 4 x dim 4096) for decode-sized token
// counts, single-threaded, and at the decode shapes on a two-thread pool.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/hc_mix.h"
#include "kernels/cpu/isa.h"

namespace {

using dsv4::kernels::Isa;

constexpr int64_t kWidth = 4 * 4096;

std::vector<float> pseudo_random(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(seed >> 8) % 2001 - 1000) / 1000.0f;
  }
  return v;
}

void hc_case(benchmark::State& state, Isa isa, int64_t n_mix, int64_t n, dsv4::ThreadPool* pool) {
  const auto fn = pseudo_random(n_mix * kWidth, 1);
  const auto packed = dsv4::kernels::hc_pack_fn(fn.data(), n_mix, kWidth);
  const auto x = pseudo_random(n * kWidth, 2);
  std::vector<float> m(static_cast<size_t>(n * n_mix));
  for (auto _ : state) {
    dsv4::kernels::hc_mixes(packed.data(), n_mix, kWidth, x.data(), n, 1e-6f, m.data(), isa, pool);
    benchmark::DoNotOptimize(m.data());
  }
}

const int kRegistered = [] {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int64_t n_mix : {4, 12, 24})
      for (int64_t n : {1, 2, 4, 8})
        benchmark::RegisterBenchmark((std::string("hc_mixes/") + dsv4::kernels::isa_name(isa) +
                                      "/mixes=" + std::to_string(n_mix) + "/n=" + std::to_string(n))
                                         .c_str(),
                                     [=](benchmark::State& s) { hc_case(s, isa, n_mix, n, nullptr); });
    // The model's decode shape on its two-thread pool (wall time: the pool's threads work for the caller).
    static dsv4::ThreadPool pool2(2);
    for (int64_t n : {1, 8})
      benchmark::RegisterBenchmark((std::string("hc_mixes/") + dsv4::kernels::isa_name(isa) + "/mixes=24/n=" +
                                    std::to_string(n) + "/threads=2")
                                       .c_str(),
                                   [=](benchmark::State& s) { hc_case(s, isa, 24, n, &pool2); })
          ->UseRealTime();
  }
  return 0;
}();

}  // namespace
