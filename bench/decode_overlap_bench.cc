// bench: the decode step's pattern in miniature — serial work on the calling thread (norms, mHC, attention
// over a short context: cache-resident arithmetic) followed by a pool-dispatched FP8 GEMV streamed from
// DRAM — with and without ThreadPool::warm posting the GEMV's weights to the idle workers before the
// serial work. Each iteration walks the next of 128 matrices of a 1 GiB huge-page region (twice the L3 of
// the machine this was written on), so every GEMV starts cold unless warm() pulled it in. Counters: the
// GEMV's own wall time per call and its GB/s; the serial work's wall; the bytes the workers prefetched.
// The comparison behind model/deepseek_v4's warm_weights calls (Execution::warm).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "core/host_memory.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/quant_matmul.h"

namespace {

constexpr int kMats = 128;
constexpr int64_t kRows = 2048, kCols = 4096;  // 8 MiB FP8 (attn wq_a-sized at V4-Flash's dim)
constexpr int64_t kMatBytes = kRows * kCols;

const uint8_t* region() {
  static dsv4::PageMemory mem;
  if (mem.data() != nullptr) return reinterpret_cast<const uint8_t*>(mem.data());
  auto r = dsv4::PageMemory::allocate(static_cast<uint64_t>(kMats * kMatBytes), dsv4::PageKind::kHuge);
  if (!r.is_ok()) return nullptr;
  mem = std::move(r).value();
  auto* p = reinterpret_cast<uint8_t*>(mem.data());
  uint32_t seed = 5;
  for (int64_t i = 0; i < kMats * kMatBytes; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = static_cast<uint8_t>((seed >> 24) & 0xEF);  // no NaN E4M3 codes
  }
  return p;
}

// ~`us` microseconds of cache-resident arithmetic (what a norm or an mHC mix does between dispatches).
float serial_work(std::vector<float>& buf, int64_t us) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  float acc = 0;
  do {
    for (float& v : buf) acc += v * 1.0001f;
  } while (std::chrono::steady_clock::now() < end);
  return acc;
}

// Iterations alternate cold (no post) and warm (post, serial work, withdraw, GEMV), so both halves of the
// comparison see the same load on a shared machine; the counters give each half's per-call means.
void overlap_case(benchmark::State& state, int64_t serial_us) {
  const uint8_t* base = region();
  if (base == nullptr) {
    state.SkipWithError("no memory for the region");
    return;
  }
  std::vector<uint8_t> scales(static_cast<size_t>((kRows / 128) * (kCols / 128)), 127);
  std::vector<float> x(static_cast<size_t>(kCols)), y(static_cast<size_t>(kRows)), buf(16 << 10, 1.0f);
  for (int64_t i = 0; i < kCols; ++i) x[static_cast<size_t>(i)] = static_cast<float>(i % 7) - 3.0f;
  dsv4::fake_quant_fp8(x, 128);
  dsv4::ThreadPool pool(2);
  const dsv4::kernels::MatmulOptions opt{true, dsv4::kernels::Isa::kAvx512, &pool};
  const uint64_t warmed0 = pool.warmed_bytes();
  double gemv_s[2] = {0, 0}, serial_s[2] = {0, 0};
  int64_t calls[2] = {0, 0};
  int i = 0;
  for (auto _ : state) {
    const uint8_t* codes = base + static_cast<int64_t>(i) * kMatBytes;
    const int warm = i % 2;
    i = (i + 1) % kMats;
    if (warm) {
      const dsv4::ThreadPool::WarmRange r[] = {{codes, static_cast<size_t>(kMatBytes)}};
      pool.warm(r);
    }
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(serial_work(buf, serial_us));
    const auto t1 = std::chrono::steady_clock::now();
    if (warm) pool.warm({});  // the model's dispatch withdraws the post as it starts (linear.h)
    dsv4::kernels::fp8_gemm({codes, scales.data(), kRows, kCols}, x.data(), 1, y.data(), opt);
    benchmark::DoNotOptimize(y.data());
    const auto t2 = std::chrono::steady_clock::now();
    serial_s[warm] += std::chrono::duration<double>(t1 - t0).count();
    gemv_s[warm] += std::chrono::duration<double>(t2 - t1).count();
    ++calls[warm];
  }
  for (int w = 0; w < 2; ++w) {
    const auto n = static_cast<double>(std::max<int64_t>(1, calls[w]));
    const std::string k = w ? "warm_" : "cold_";
    state.counters[k + "gemv_us"] = gemv_s[w] / n * 1e6;
    state.counters[k + "serial_us"] = serial_s[w] / n * 1e6;
    state.counters[k + "step_us"] = (gemv_s[w] + serial_s[w]) / n * 1e6;
  }
  state.counters["warmed_MB"] = static_cast<double>(pool.warmed_bytes() - warmed0) / static_cast<double>(std::max<int64_t>(1, calls[1])) / 1e6;
  state.SetBytesProcessed(static_cast<int64_t>(kMatBytes) * state.iterations());
}

const int kRegistered = [] {
  for (int64_t us : {0, 50, 200, 500})
    benchmark::RegisterBenchmark(("decode_overlap/serial_us=" + std::to_string(us)).c_str(),
                                 [=](benchmark::State& s) { overlap_case(s, us); })
        ->UseRealTime();
  return 0;
}();

}  // namespace
