// bench: Google Benchmark cases for the quantized weight kernels, named like the kernels themselves
// (fp4_gemm/<isa>/m=<tokens>/<rows>x<cols>). Single-threaded and cache-resident on purpose: these
// measure the in-register decode + FMA throughput a core can sustain, which must exceed the core's share
// of DRAM bandwidth for decode to stay bandwidth-bound. `dsv4 bench` measures the DRAM-bound figures.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/host_memory.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/compute_probe.h"
#include "kernels/cpu/head_norm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/moe_layer.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles.h"
#include "kernels/cpu/row_pairs.h"

namespace {

using dsv4::kernels::Isa;

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed, uint8_t mask) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) {
    seed = seed * 1664525u + 1013904223u;
    b = static_cast<uint8_t>((seed >> 24) & mask);
  }
  return v;
}

std::vector<float> activations(int64_t m, int64_t k) {
  std::vector<float> x(static_cast<size_t>(m * k));
  uint32_t s = 5;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>(s >> 20) - 2048) / 1024.0f;
  }
  dsv4::fake_quant_fp8(x, 128);
  return x;
}

// The compute probe's loop for one instruction (kernels/cpu/compute_probe.h): the core's peak GFLOP/s in
// the same process and CPU-time measure as the GEMM cases below, so a case's fraction of the peak can be
// read off one run (the machine's load moves both alike).
void compute_case(benchmark::State& state, dsv4::kernels::ComputeInsn insn) {
  constexpr int64_t kIters = 4096;
  for (auto _ : state) {
    uint64_t h = 0;
#if defined(__x86_64__)
    switch (insn) {
      case dsv4::kernels::ComputeInsn::kFp32Fma:
        h = dsv4::kernels::detail::compute_loop_fp32_fma(kIters);
        break;
      case dsv4::kernels::ComputeInsn::kFp32FmaYmm:
        h = dsv4::kernels::detail::compute_loop_fp32_fma_ymm(kIters);
        break;
      case dsv4::kernels::ComputeInsn::kBf16Dot:
        h = dsv4::kernels::detail::compute_loop_bf16_dot(kIters);
        break;
      case dsv4::kernels::ComputeInsn::kAmxBf16:
        h = dsv4::kernels::detail::compute_loop_amx_bf16(kIters);
        break;
      case dsv4::kernels::ComputeInsn::kInt8Dot:
        h = dsv4::kernels::detail::compute_loop_int8_dot(kIters);
        break;
    }
#endif
    benchmark::DoNotOptimize(h);
  }
  const double flops = static_cast<double>(kIters * dsv4::kernels::detail::compute_loop_insns(insn) *
                                           dsv4::kernels::compute_insn_flops(insn));
  state.counters["GFLOP/s"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

const int kRegisteredProbes = [] {
  for (auto insn : {dsv4::kernels::ComputeInsn::kFp32Fma, dsv4::kernels::ComputeInsn::kFp32FmaYmm,
                    dsv4::kernels::ComputeInsn::kBf16Dot, dsv4::kernels::ComputeInsn::kAmxBf16,
                    dsv4::kernels::ComputeInsn::kInt8Dot})
    if (dsv4::kernels::compute_insn_supported(insn))
      benchmark::RegisterBenchmark((std::string("compute_probe/") + dsv4::kernels::compute_insn_name(insn)).c_str(),
                                   [=](benchmark::State& s) { compute_case(s, insn); });
  return 0;
}();

// The FP8 activation fake-quant of one token's linear input (1x128 blocks; bf16=1: w2's input, rounded to
// bf16 first). Out of place, as linear.cc runs it, so every iteration quantizes the same unquantized row.
void act_quant_case(benchmark::State& state, Isa isa, int64_t n, bool bf16_first) {
  std::vector<float> x(static_cast<size_t>(n)), out(x.size());
  uint32_t s = 9;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>(s >> 12) - (1 << 19)) * 0x1p-16f;
  }
  for (auto _ : state) {
    dsv4::kernels::act_quant_fp8(x.data(), out.data(), n, 128, bf16_first, isa);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

const int kRegisteredActQuant = [] {
  for (Isa isa : {Isa::kScalar, Isa::kAvx512})
    if (dsv4::kernels::isa_supported(isa))
      for (int64_t n : {4096, 2048})
        for (bool bf16_first : {false, true})
          benchmark::RegisterBenchmark(("act_quant_fp8/" + std::string(dsv4::kernels::isa_name(isa)) + "/n=" +
                                        std::to_string(n) + "/bf16=" + std::to_string(bf16_first ? 1 : 0))
                                           .c_str(),
                                       [=](benchmark::State& st) { act_quant_case(st, isa, n, bf16_first); });
  return 0;
}();

// The attention's per-head query norm of one token at V4-Flash's shape (64 heads x 512), in place: each
// iteration normalizes a fresh copy (the copy is timed too; it is a 128 KB memcpy, small beside the norm).
void head_norm_case(benchmark::State& state, Isa isa) {
  constexpr int64_t kHeads = 64, kDim = 512;
  std::vector<float> x(static_cast<size_t>(kHeads * kDim)), work(x.size());
  uint32_t s = 11;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(static_cast<int>(s >> 12) - (1 << 19)) * 0x1p-18f;
  }
  for (auto _ : state) {
    work = x;
    dsv4::kernels::head_rms_norm_bf16(work.data(), kHeads, kDim, 1e-6f, isa);
    benchmark::DoNotOptimize(work.data());
  }
  state.SetItemsProcessed(state.iterations() * kHeads);
}

const int kRegisteredHeadNorm = [] {
  for (Isa isa : {Isa::kScalar, Isa::kAvx512})
    if (dsv4::kernels::isa_supported(isa))
      benchmark::RegisterBenchmark(
          ("head_rms_norm_bf16/" + std::string(dsv4::kernels::isa_name(isa)) + "/heads=64x512").c_str(),
          [=](benchmark::State& st) { head_norm_case(st, isa); });
  return 0;
}();

void fp4_case(benchmark::State& state, Isa isa, int64_t n, int64_t k, int64_t m) {
  const auto packed = random_bytes(static_cast<size_t>(n * k / 2), 1, 0xFF);
  auto scales = random_bytes(static_cast<size_t>(n * k / 32), 2, 0x07);
  for (auto& s : scales) s = static_cast<uint8_t>(s + 120);
  const auto x = activations(m, k);
  std::vector<float> out(static_cast<size_t>(m * n));
  const dsv4::kernels::Fp4Matrix w{packed.data(), scales.data(), n, k};
  for (auto _ : state) {
    dsv4::kernels::fp4_gemm(w, x.data(), m, out.data(), {true, isa, nullptr, 1});
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * dsv4::kernels::fp4_weight_bytes(w));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void bf16_case(benchmark::State& state, Isa isa, int64_t n, int64_t k, int64_t m) {
  std::vector<uint16_t> w16(static_cast<size_t>(n * k));
  const auto lo = random_bytes(w16.size(), 6, 0xFF);
  for (size_t i = 0; i < w16.size(); ++i) w16[i] = static_cast<uint16_t>(0x3B00 | lo[i] | ((lo[i] & 1) << 15));
  const auto x = activations(m, k);
  std::vector<float> out(static_cast<size_t>(m * n));
  std::vector<uint8_t> row_ok(static_cast<size_t>(n));  // found once, as the model's loader does
  dsv4::kernels::bf16_rows_in_guard(w16.data(), n, k, row_ok.data());
  const dsv4::kernels::Bf16Matrix w{w16.data(), n, k, row_ok.data()};
  for (auto _ : state) {
    dsv4::kernels::bf16_gemm(w, x.data(), m, out.data(), {false, isa, nullptr, 1});
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * dsv4::kernels::bf16_weight_bytes(w));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

void fp8_case(benchmark::State& state, Isa isa, int64_t n, int64_t k, int64_t m) {
  const auto codes = random_bytes(static_cast<size_t>(n * k), 3, 0xEF);  // bit 4 clear: no NaN codes
  auto scales = random_bytes(static_cast<size_t>(((n + 127) / 128) * ((k + 127) / 128)), 4, 0x07);
  for (auto& s : scales) s = static_cast<uint8_t>(s + 120);
  const auto x = activations(m, k);
  std::vector<float> out(static_cast<size_t>(m * n));
  const dsv4::kernels::Fp8Matrix w{codes.data(), scales.data(), n, k};
  for (auto _ : state) {
    dsv4::kernels::fp8_gemm(w, x.data(), m, out.data(), {true, isa, nullptr, 1});
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * dsv4::kernels::fp8_weight_bytes(w));
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k) * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// DRAM-streamed FP8 and BF16 decode GEMVs (m tokens) on 4 KiB or 2 MiB pages, on 1 or 2 threads (the
// model's weights sit on 2 MiB pages): each call reads the next of kDenseStreamMats 32 MiB matrices of one
// 640 MiB region (beyond the 480 MiB L3), FP8 4096x8192 (attn.wo_b) or BF16 4096x4096 (attn.wo_a's rows).
// One region at a time is kept (a case of the other page kind replaces it). Real time: with 2 threads
// the figure is what the pool's decode sustains from memory, to read against `dsv4 bench`'s probe.
constexpr int kDenseStreamMats = 20;
constexpr int64_t kDenseStreamMatBytes = int64_t{32} << 20;

const uint8_t* dense_stream_region(dsv4::PageKind kind) {
  static dsv4::PageMemory mem;
  if (mem.data() != nullptr && mem.kind() == kind) return reinterpret_cast<const uint8_t*>(mem.data());
  mem = dsv4::PageMemory();  // release the other kind first
  auto r = dsv4::PageMemory::allocate(static_cast<uint64_t>(kDenseStreamMats * kDenseStreamMatBytes), kind);
  if (!r.is_ok()) return nullptr;
  mem = std::move(r).value();
  // Valid as both formats: no NaN E4M3 codes (bit 4 clear), and every bf16 word's high byte 0x3B / 0xBB
  // (normal values in ±[2^-9, 2^-8): a denormal input would make each FMA a microcode assist).
  auto* p = reinterpret_cast<uint8_t*>(mem.data());
  uint32_t seed = 17;
  for (int64_t i = 0; i < kDenseStreamMats * kDenseStreamMatBytes; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const auto b = static_cast<uint8_t>(seed >> 24);
    p[i] = i % 2 == 0 ? static_cast<uint8_t>(b & 0xEF) : static_cast<uint8_t>((b & 0x80) | 0x3B);
  }
  return p;
}

// DRAM-streamed FP8 / BF16 GEMV of rows x cols: each call reads the next matrix of that shape laid back to
// back in the 640 MiB region (as tensors follow each other in a weight copy), on `kind` pages and 1 or 2
// threads. isa kAmx: the AMX kernel at every m (amx_min_tokens = 1), the dense projections' path.
void dense_stream(benchmark::State& state, Isa isa, bool fp8, int64_t rows, int64_t cols, dsv4::PageKind kind,
                  int threads, int64_t m) {
  const uint8_t* region = dense_stream_region(kind);
  if (region == nullptr) {
    state.SkipWithError("no memory for the stream region");
    return;
  }
  const int64_t bytes = rows * cols * (fp8 ? 1 : 2);
  const int64_t n_mats = kDenseStreamMats * kDenseStreamMatBytes / bytes;
  std::vector<uint8_t> scales = random_bytes(static_cast<size_t>(((rows + 127) / 128) * ((cols + 127) / 128)), 8, 0x07);
  for (auto& b : scales) b = static_cast<uint8_t>(b + 120);
  const auto x = activations(m, cols);
  std::vector<float> out(static_cast<size_t>(m * rows));
  dsv4::ThreadPool pool(threads);
  const dsv4::kernels::MatmulOptions opt{true, isa, threads > 1 ? &pool : nullptr, 1};
  // BF16: each matrix's row guards found once, as the model's loader does.
  std::vector<uint8_t> row_ok(fp8 ? 0 : static_cast<size_t>(n_mats * rows));
  for (int64_t j = 0; !fp8 && j < n_mats; ++j)
    dsv4::kernels::bf16_rows_in_guard(reinterpret_cast<const uint16_t*>(region + j * bytes), rows, cols,
                                      row_ok.data() + j * rows);
  int64_t i = 0;
  for (auto _ : state) {
    const uint8_t* base = region + i * bytes;
    if (fp8)
      dsv4::kernels::fp8_gemm({base, scales.data(), rows, cols}, x.data(), m, out.data(), opt);
    else
      dsv4::kernels::bf16_gemm({reinterpret_cast<const uint16_t*>(base), rows, cols, row_ok.data() + i * rows},
                               x.data(), m, out.data(), opt);
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % n_mats;
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

// 32 MiB matrices with rows of `cols` (FP8 8192 = attn.wo_b, 1024 = attn.wq_b's 1 KiB rows, four to a 4 KiB
// page), on either page kind and any ISA.
void dense_stream_case(benchmark::State& state, Isa isa, bool fp8, int64_t cols, dsv4::PageKind kind, int threads,
                       int64_t m) {
  dense_stream(state, isa, fp8, kDenseStreamMatBytes / (fp8 ? cols : 2 * cols), cols, kind, threads, m);
}

// The model's dense shapes on AMX and 2 MiB pages. The model's one-token dispatch (linear_jobs) hands each
// thread 1 MiB row slices of a projection as single-threaded calls: the threads=1 cases with 1 MiB shapes
// (256x4096 FP8, 128x4096 BF16) measure that; the whole shapes on 2 threads are `dsv4 bench`'s GEMV rows.
// CPU time per call is the robust measure on a loaded machine (one thread); with 2 threads read real time.
void dense_shape_stream_case(benchmark::State& state, Isa isa, bool fp8, int64_t rows, int64_t cols, int threads,
                             int64_t m) {
  dense_stream(state, isa, fp8, rows, cols, dsv4::PageKind::kHuge, threads, m);
}

// DRAM-streamed FP4 decode GEMVs with the routed experts' row lengths: k = 4096 (w1/w3, 2 KiB rows) or
// k = 2048 (w2, 1 KiB rows), so two rows share a 4 KiB page as in the model (the far-pair tiles,
// row_pairs.h, exist for that). Each call reads the next 32 MiB of packed codes of the same 640 MiB
// region as the FP8/BF16 cases (every byte is a valid pair of E2M1 codes) plus its 2 MiB of scales
// (codes 120..127: no denormal products), on 4 KiB or 2 MiB pages, on 1 or 2 threads. Real time.
void fp4_stream_case(benchmark::State& state, Isa isa, dsv4::PageKind kind, int threads, int64_t m, int64_t k) {
  const uint8_t* region = dense_stream_region(kind);
  if (region == nullptr) {
    state.SkipWithError("no memory for the stream region");
    return;
  }
  const int64_t rows = 2 * kDenseStreamMatBytes / k;
  static const std::vector<uint8_t> scales = [] {
    auto v = random_bytes(static_cast<size_t>(kDenseStreamMats * kDenseStreamMatBytes / 16), 8, 0x07);
    for (auto& b : v) b = static_cast<uint8_t>(b + 120);
    return v;
  }();
  const auto x = activations(m, k);
  std::vector<float> out(static_cast<size_t>(m * rows));
  dsv4::ThreadPool pool(threads);
  const dsv4::kernels::MatmulOptions opt{true, isa, threads > 1 ? &pool : nullptr, 1};
  int i = 0;
  for (auto _ : state) {
    const dsv4::kernels::Fp4Matrix w{region + i * kDenseStreamMatBytes, scales.data() + i * kDenseStreamMatBytes / 16,
                                     rows, k};
    dsv4::kernels::fp4_gemm(w, x.data(), m, out.data(), opt);
    benchmark::DoNotOptimize(out.data());
    i = (i + 1) % kDenseStreamMats;
  }
  state.SetBytesProcessed(state.iterations() * (kDenseStreamMatBytes + kDenseStreamMatBytes / 16));
}

// ids [m, top_k] <- top_k distinct experts of n_experts per token, uniform, from an LCG on seed (fresh
// each step: the MoE cases' routing).
void draw_routing(uint32_t& seed, int64_t m, int64_t top_k, int64_t n_experts, std::vector<int32_t>& ids) {
  for (int64_t t = 0; t < m; ++t)
    for (int64_t j = 0; j < top_k; ++j) {
      int32_t e;
      bool dup;
      do {
        seed = seed * 1664525u + 1013904223u;
        e = static_cast<int32_t>((seed >> 16) % n_experts);
        dup = false;
        for (int64_t i = 0; i < j; ++i) dup |= ids[static_cast<size_t>(t * top_k + i)] == e;
      } while (dup);
      ids[static_cast<size_t>(t * top_k + j)] = e;
    }
}

// One MoE layer step at V4-Flash-medium shapes (d 4096, intermediate 2048, top-6 + the FP8 shared expert)
// over 24 routed experts (300 MiB, so weights come from DRAM/L3 as in decode): at batch 8 its 48
// assignments give each expert ~2 tokens; at batch 4 its 24 give an active expert 1 token 61% of the time,
// close to the medium model's batch 8 (48 assignments over 64 experts: 69% of active experts see 1 token).
// Single-threaded: CPU time per step is the figure that stays comparable on a loaded machine.
void moe_layer_case(benchmark::State& state, Isa isa, int64_t m) {
  constexpr int64_t kD = 4096, kInter = 2048, kExperts = 24, kTopK = 6;
  struct Weights {
    std::vector<uint8_t> packed, scales, fp8, fp8_scales;
    std::vector<dsv4::kernels::Fp4Expert> experts;
    dsv4::kernels::Fp8Expert shared;
  };
  static const Weights w = [] {
    Weights w;
    const int64_t mat = kInter * kD;  // weights per matrix
    w.packed = random_bytes(static_cast<size_t>(kExperts * 3 * mat / 2), 9, 0xFF);
    w.scales = random_bytes(static_cast<size_t>(kExperts * 3 * mat / 32), 10, 0x07);
    for (auto& b : w.scales) b = static_cast<uint8_t>(b + 120);
    w.fp8 = random_bytes(static_cast<size_t>(3 * mat), 11, 0xEF);
    w.fp8_scales = random_bytes(static_cast<size_t>(3 * mat / (128 * 128)), 12, 0x07);
    for (auto& b : w.fp8_scales) b = static_cast<uint8_t>(b + 120);
    auto fp4 = [&](int64_t i, int64_t rows, int64_t cols) {
      return dsv4::kernels::Fp4Matrix{w.packed.data() + i * mat / 2, w.scales.data() + i * mat / 32, rows, cols};
    };
    auto fp8 = [&](int64_t i, int64_t rows, int64_t cols) {
      return dsv4::kernels::Fp8Matrix{w.fp8.data() + i * mat, w.fp8_scales.data() + i * mat / (128 * 128), rows, cols};
    };
    for (int64_t e = 0; e < kExperts; ++e)
      w.experts.push_back({fp4(3 * e, kInter, kD), fp4(3 * e + 1, kInter, kD), fp4(3 * e + 2, kD, kInter)});
    w.shared = {fp8(0, kInter, kD), fp8(1, kInter, kD), fp8(2, kD, kInter)};
    return w;
  }();
  const dsv4::kernels::MoeLayerWeights lw{w.experts.data(), kExperts, &w.shared, 10.0f};
  auto x = activations(m, kD);
  for (auto& v : x) v *= 0.25f;
  std::vector<float> y(static_cast<size_t>(m * kD)), rw(static_cast<size_t>(m * kTopK), 1.0f / kTopK);
  std::vector<int32_t> ids(static_cast<size_t>(m * kTopK));
  uint32_t seed = 13;
  dsv4::kernels::MoeLayerScratch scratch;
  for (auto _ : state) {
    state.PauseTiming();
    draw_routing(seed, m, kTopK, kExperts, ids);
    state.ResumeTiming();
    dsv4::kernels::moe_layer(lw, x.data(), m, ids.data(), rw.data(), kTopK, y.data(), scratch, {true, isa, nullptr, 1});
    benchmark::DoNotOptimize(y.data());
  }
}

// The MoE layer as the medium model runs it in decode: 64 routed experts (d 4096, intermediate 2048,
// top-6, uniform routing: at m = 8 its 48 assignments land on ~35 distinct experts, the model's ~34) and
// the FP8 shared expert, on 2 MiB pages like --weights copy, the pool of `threads`, the model's routing
// thresholds (routed experts on AMX from 16 tokens, the shared expert on AMX at every count where the ISA
// is AMX). Two layers' weights (1.7 GB with scales, beyond the 480 MiB L3) alternate, so every step
// streams its experts from DRAM. Real time per step, and the process's CPU time: with 2 threads the
// pool's idle spinning at each stage end counts, a thread descheduled by another process does not (the
// figure to compare on a loaded machine). dsv4 bench's moe_layer row is the single-layer, m = 1 view.
void moe_stream_case(benchmark::State& state, Isa isa, int threads, int64_t m) {
  constexpr int64_t kD = 4096, kInter = 2048, kExperts = 64, kTopK = 6, kLayers = 2;
  constexpr int64_t kMat = kInter * kD;                                  // weights per matrix
  constexpr int64_t kLayerBytes = (kExperts * 3 * kMat / 2) + 3 * kMat;  // routed FP4 codes + shared FP8 codes
  static dsv4::PageMemory mem;
  static std::vector<uint8_t> fp4_scales, fp8_scales;
  if (mem.data() == nullptr) {
    auto r = dsv4::PageMemory::allocate(static_cast<uint64_t>(kLayers * kLayerBytes), dsv4::PageKind::kHuge);
    if (!r.is_ok()) {
      state.SkipWithError("no memory for the MoE stream region");
      return;
    }
    mem = std::move(r).value();
    // Every byte a valid FP4 pair and no NaN E4M3 code (bit 4 clear, as dense_stream_region).
    auto* p = reinterpret_cast<uint8_t*>(mem.data());
    uint32_t seed = 19;
    for (int64_t i = 0; i < kLayers * kLayerBytes; ++i) {
      seed = seed * 1664525u + 1013904223u;
      p[i] = static_cast<uint8_t>((seed >> 24) & 0xEF);
    }
    fp4_scales = random_bytes(static_cast<size_t>(kLayers * kExperts * 3 * kMat / 32), 10, 0x07);
    for (auto& b : fp4_scales) b = static_cast<uint8_t>(b + 120);
    fp8_scales = random_bytes(static_cast<size_t>(kLayers * 3 * kMat / (128 * 128)), 12, 0x07);
    for (auto& b : fp8_scales) b = static_cast<uint8_t>(b + 120);
  }
  struct Layer {
    std::vector<dsv4::kernels::Fp4Expert> experts;
    dsv4::kernels::Fp8Expert shared;
  };
  std::vector<Layer> layers(kLayers);
  const auto* base = reinterpret_cast<const uint8_t*>(mem.data());
  for (int64_t l = 0; l < kLayers; ++l) {
    const uint8_t* codes = base + l * kLayerBytes;
    auto fp4 = [&](int64_t i, int64_t rows, int64_t cols) {
      return dsv4::kernels::Fp4Matrix{codes + i * kMat / 2, fp4_scales.data() + (l * kExperts * 3 + i) * kMat / 32,
                                      rows, cols};
    };
    auto fp8 = [&](int64_t i, int64_t rows, int64_t cols) {
      return dsv4::kernels::Fp8Matrix{codes + kExperts * 3 * kMat / 2 + i * kMat,
                                      fp8_scales.data() + (l * 3 + i) * kMat / (128 * 128), rows, cols};
    };
    for (int64_t e = 0; e < kExperts; ++e)
      layers[static_cast<size_t>(l)].experts.push_back(
          {fp4(3 * e, kInter, kD), fp4(3 * e + 1, kInter, kD), fp4(3 * e + 2, kD, kInter)});
    layers[static_cast<size_t>(l)].shared = {fp8(0, kInter, kD), fp8(1, kInter, kD), fp8(2, kD, kInter)};
  }
  auto x = activations(m, kD);
  for (auto& v : x) v *= 0.25f;
  std::vector<float> y(static_cast<size_t>(m * kD)), rw(static_cast<size_t>(m * kTopK), 1.0f / kTopK);
  std::vector<int32_t> ids(static_cast<size_t>(m * kTopK));
  uint32_t seed = 13;
  dsv4::ThreadPool pool(threads);
  dsv4::kernels::MatmulOptions opt{true, isa, threads > 1 ? &pool : nullptr, dsv4::kernels::kAmxMinTokensDefault};
  dsv4::kernels::MoeLayerScratch scratch;
  int64_t step = 0, bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<bool> active(kExperts, false);
    draw_routing(seed, m, kTopK, kExperts, ids);
    for (int32_t e : ids) active[static_cast<size_t>(e)] = true;
    for (bool a : active) bytes += a ? 3 * (kMat / 2 + kMat / 32) : 0;
    bytes += 3 * kMat;
    const Layer& l = layers[static_cast<size_t>(step % kLayers)];
    const dsv4::kernels::MoeLayerWeights lw{l.experts.data(), kExperts, &l.shared, 10.0f, 1};
    state.ResumeTiming();
    dsv4::kernels::moe_layer(lw, x.data(), m, ids.data(), rw.data(), kTopK, y.data(), scratch, opt);
    benchmark::DoNotOptimize(y.data());
    ++step;
  }
  state.SetBytesProcessed(bytes);
}

// Which rows a one-thread pass over one 32 MiB stream-region matrix hands the nibble-plane tile, in the
// order it reads them (CPU time per call, huge pages, the callers' one-row-ahead prefetch): what the
// stream gets from the number of concurrent row streams the L2 streamer can follow (one per page).
enum class RowOrder {
  kOneStream,    // one row per tile, rows in order: one stream
  kPairs32,      // rows q and q + 16 of each 32-row block (fp4_gemm's far pairs): two streams
  kTwoHalves,    // rows q and q + rows/2 (moe_layer stage 1: w1 row i beside w3 row i): two streams
  kFourStreams,  // the same pairs, tiles in interleaved_tile order (moe_layer stage 2): four streams
};
const char* row_order_name(RowOrder o) {
  switch (o) {
    case RowOrder::kOneStream: return "one_stream";
    case RowOrder::kPairs32: return "pairs32";
    case RowOrder::kTwoHalves: return "two_halves";
    case RowOrder::kFourStreams: return "four_streams";
  }
  return "?";
}
void fp4_order_case(benchmark::State& state, Isa isa, RowOrder order, int64_t m, int64_t k) {
  const uint8_t* region = dense_stream_region(dsv4::PageKind::kHuge);
  if (region == nullptr) {
    state.SkipWithError("no memory for the stream region");
    return;
  }
  namespace kd = dsv4::kernels::detail;
  const int64_t rows = 2 * kDenseStreamMatBytes / k, half = k / 2, n_sblocks = k / 32;
  static const std::vector<uint8_t> scales = [] {
    auto v = random_bytes(static_cast<size_t>(kDenseStreamMats * kDenseStreamMatBytes / 16), 8, 0x07);
    for (auto& b : v) b = static_cast<uint8_t>(b + 120);
    return v;
  }();
  const auto x = activations(m, k);
  const kd::Fp4Kernel kern = kd::fp4_kernel_for_x(isa, x.data(), m * k);
  const int64_t ldx = kd::fp4_x_stride(kern.layout, k);
  std::vector<float> xp(static_cast<size_t>(m * ldx));
  kd::fp4_prepare_x(kern.layout, x.data(), m, k, xp.data());
  float sink = 0;
  int i = 0;
  for (auto _ : state) {
    const uint8_t* w = region + i * kDenseStreamMatBytes;
    const uint8_t* sc = scales.data() + i * kDenseStreamMatBytes / 16;
    kd::Fp4Tile t;
    t.k = k;
    t.ldx = ldx;
    t.x = xp.data();
    t.n_tokens = static_cast<int>(m);
    t.prefetch = half;  // the next row of each stream
    auto run = [&](int64_t r0, int64_t r1) {
      t.n_rows = r1 < 0 ? 1 : 2;
      t.w[0] = w + r0 * half;
      t.s[0] = sc + r0 * n_sblocks;
      if (r1 >= 0) {
        t.w[1] = w + r1 * half;
        t.s[1] = sc + r1 * n_sblocks;
      }
      kern.tile(t);
      sink += t.sums[0][0];
    };
    switch (order) {
      case RowOrder::kOneStream:
        for (int64_t r = 0; r < rows; ++r) run(r, -1);
        break;
      case RowOrder::kPairs32:
        for (int64_t nb = 0; nb < rows; nb += 32)
          for (int64_t q = 0; q < 16; ++q) run(nb + q, nb + q + 16);
        break;
      case RowOrder::kTwoHalves:
        for (int64_t q = 0; q < rows / 2; ++q) run(q, q + rows / 2);
        break;
      case RowOrder::kFourStreams:
        for (int64_t j = 0; j < rows / 2; ++j) {
          const int64_t q = kd::interleaved_tile(rows / 2, j);
          run(q, q + rows / 2);
        }
        break;
    }
    benchmark::DoNotOptimize(sink);
    i = (i + 1) % kDenseStreamMats;
  }
  state.SetBytesProcessed(state.iterations() * (kDenseStreamMatBytes + kDenseStreamMatBytes / 16));
}

// 1 MiB-ish matrices: cache-resident, so the figure is the kernel's compute ceiling.
// The cache-resident and moe_layer cases pass amx_min_tokens = 1: their "amx" cases time the AMX kernel at
// every m (the library default keeps calls below kAmxMinTokensDefault tokens on the vector tiles).
const int kRegistered = [] {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    const std::string tag = dsv4::kernels::isa_name(isa);
    for (int64_t m : {1, 2, 4, 8, 16, 64, 256}) {
      if (isa == Isa::kScalar && m > 1) continue;
      const std::string mm = "/m=" + std::to_string(m);
      benchmark::RegisterBenchmark(("fp4_gemm/" + tag + mm + "/512x4096").c_str(),
                                   [=](benchmark::State& s) { fp4_case(s, isa, 512, 4096, m); });
      benchmark::RegisterBenchmark(("bf16_gemm/" + tag + mm + "/128x4096").c_str(),
                                   [=](benchmark::State& s) { bf16_case(s, isa, 128, 4096, m); });
      benchmark::RegisterBenchmark(("fp8_gemm/" + tag + mm + "/256x4096").c_str(),
                                   [=](benchmark::State& s) { fp8_case(s, isa, 256, 4096, m); });
      // Same weight bytes at K = 1024: 8 tokens' activations (32 KB) fit in L1, so against the 4096-column
      // case this shows what re-reading them from L2 costs.
      // AMX: the same bytes in 1 KiB rows (attn.wq_b's shape) against 256x4096 show the per-16-row-block costs.
      // And in 8 KiB rows (attn.wo_b's): at 8 tokens the packed activations (128 KB) no longer fit in L1.
      if (isa == Isa::kAmx && m <= 8) {
        benchmark::RegisterBenchmark(("fp8_gemm/" + tag + mm + "/1024x1024").c_str(),
                                     [=](benchmark::State& s) { fp8_case(s, isa, 1024, 1024, m); });
        benchmark::RegisterBenchmark(("fp8_gemm/" + tag + mm + "/128x8192").c_str(),
                                     [=](benchmark::State& s) { fp8_case(s, isa, 128, 8192, m); });
        benchmark::RegisterBenchmark(("fp8_gemm/" + tag + mm + "/512x2048").c_str(),
                                     [=](benchmark::State& s) { fp8_case(s, isa, 512, 2048, m); });
      }
      if ((isa == Isa::kAvx512 || isa == Isa::kAvx512Bf16) && m <= 8) {
        benchmark::RegisterBenchmark(("bf16_gemm/" + tag + mm + "/512x1024").c_str(),
                                     [=](benchmark::State& s) { bf16_case(s, isa, 512, 1024, m); });
        benchmark::RegisterBenchmark(("fp8_gemm/" + tag + mm + "/1024x1024").c_str(),
                                     [=](benchmark::State& s) { fp8_case(s, isa, 1024, 1024, m); });
        benchmark::RegisterBenchmark(("fp4_gemm/" + tag + mm + "/2048x1024").c_str(),
                                     [=](benchmark::State& s) { fp4_case(s, isa, 2048, 1024, m); });
      }
    }
  }
  // The AVX-512 cases keep their names (fp4_tile_stream/<order>/...); the VDPBF16PS tile's carry its ISA.
  for (Isa isa : {Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    const std::string prefix = isa == Isa::kAvx512 ? "fp4_tile_stream/" : "fp4_tile_stream/" + std::string(dsv4::kernels::isa_name(isa)) + "/";
    for (RowOrder order : {RowOrder::kOneStream, RowOrder::kPairs32, RowOrder::kTwoHalves, RowOrder::kFourStreams})
      for (int64_t m : {1, 2, 8})
        for (int64_t k : {4096, 2048}) {
          if (m == 8 && isa == Isa::kAvx512) continue;
          benchmark::RegisterBenchmark((prefix + std::string(row_order_name(order)) + "/m=" + std::to_string(m) +
                                        "/k=" + std::to_string(k))
                                           .c_str(),
                                       [=](benchmark::State& s) { fp4_order_case(s, isa, order, m, k); });
        }
  }
  if (dsv4::kernels::isa_supported(Isa::kAmx))
    for (int64_t m : {1, 4, 8})
      benchmark::RegisterBenchmark(("moe_layer/amx/m=" + std::to_string(m) + "/24x4096x2048").c_str(),
                                   [=](benchmark::State& s) { moe_layer_case(s, Isa::kAmx, m); });
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int64_t m : {1, 4, 8})
      benchmark::RegisterBenchmark(("moe_layer/" + std::string(dsv4::kernels::isa_name(isa)) + "/m=" +
                                    std::to_string(m) + "/24x4096x2048")
                                       .c_str(),
                                   [=](benchmark::State& s) { moe_layer_case(s, isa, m); });
    for (dsv4::PageKind kind : {dsv4::PageKind::kSmall, dsv4::PageKind::kHuge})
      for (int threads : {1, 2})
        for (int64_t m : {1, 2, 8})
          for (int64_t k : {4096, 2048})
            benchmark::RegisterBenchmark(("fp4_gemm_stream/" + std::string(dsv4::kernels::isa_name(isa)) + "/" +
                                          dsv4::page_kind_name(kind) + "/threads=" + std::to_string(threads) +
                                          "/m=" + std::to_string(m) + "/k=" + std::to_string(k))
                                             .c_str(),
                                         [=](benchmark::State& s) { fp4_stream_case(s, isa, kind, threads, m, k); })
                ->UseRealTime();
  }
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int threads : {1, 2})
      for (int64_t m : {1, 8})
        benchmark::RegisterBenchmark(("moe_layer_stream/" + std::string(dsv4::kernels::isa_name(isa)) + "/threads=" +
                                      std::to_string(threads) + "/m=" + std::to_string(m) + "/64x4096x2048")
                                         .c_str(),
                                     [=](benchmark::State& s) { moe_stream_case(s, isa, threads, m); })
            ->UseRealTime()
            ->MeasureProcessCPUTime();
  }
  // The same DRAM stream on the AMX FP4 kernel (every m: amx_min_tokens = 1), 2 MiB pages as the model's
  // --weights copy: a routed expert's 1..2-token calls against the vector tiles' rows above.
  if (dsv4::kernels::isa_supported(Isa::kAmx))
    for (int threads : {1, 2})
      for (int64_t m : {1, 2, 8})
        for (int64_t k : {4096, 2048})
          benchmark::RegisterBenchmark(("fp4_gemm_stream/amx/huge/threads=" + std::to_string(threads) + "/m=" +
                                        std::to_string(m) + "/k=" + std::to_string(k))
                                           .c_str(),
                                       [=](benchmark::State& s) {
                                         fp4_stream_case(s, Isa::kAmx, dsv4::PageKind::kHuge, threads, m, k);
                                       })
              ->UseRealTime();
  // The model's dense shapes (and the 1 MiB slices linear_jobs hands a thread; 64x4096 is the chunk the
  // pool's split gives each claim of attn.wkv on 2 threads) streamed through AMX and the vector tiles.
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    struct DenseShape {
      bool fp8;
      int64_t rows, cols;
    };
    constexpr DenseShape kShapes[] = {
        {true, 64, 4096},    {true, 256, 4096},  {true, 512, 4096},  {true, 1024, 4096},  {true, 2048, 4096}, {true, 4096, 2048},
        {true, 32768, 1024}, {true, 4096, 8192}, {false, 128, 4096}, {false, 256, 4096}, {false, 1024, 4096},
        {false, 8192, 4096}};
    for (const DenseShape& d : kShapes)
      for (int threads : {1, 2})
        for (int64_t m : {1, 8})
          benchmark::RegisterBenchmark((std::string(d.fp8 ? "fp8" : "bf16") + "_shape_stream/" +
                                        dsv4::kernels::isa_name(isa) + "/threads=" +
                                        std::to_string(threads) + "/m=" + std::to_string(m) + "/" +
                                        std::to_string(d.rows) + "x" + std::to_string(d.cols))
                                           .c_str(),
                                       [=](benchmark::State& s) {
                                         dense_shape_stream_case(s, isa, d.fp8, d.rows, d.cols, threads, m);
                                       });
  }
  // DRAM-streamed dense projections on the vector tiles and on AMX (every m), the per-role choice of
  // linear.cc: FP8 wo_b and wq_b rows, then BF16 4096 (wo_a rows).
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (!dsv4::kernels::isa_supported(isa)) continue;
    for (int64_t cols : {8192, 1024, 4096})
      for (dsv4::PageKind kind : {dsv4::PageKind::kSmall, dsv4::PageKind::kHuge})
        for (int threads : {1, 2})
          for (int64_t m : {1, 2, 4, 8}) {
            const bool fp8 = cols != 4096;
            const std::string shape = std::to_string(kDenseStreamMatBytes / (fp8 ? cols : 2 * cols)) + "x" +
                                      std::to_string(cols);
            benchmark::RegisterBenchmark((std::string(fp8 ? "fp8" : "bf16") + "_gemm_stream/" +
                                          dsv4::kernels::isa_name(isa) + "/" + dsv4::page_kind_name(kind) +
                                          "/threads=" + std::to_string(threads) + "/m=" + std::to_string(m) + "/" +
                                          shape)
                                             .c_str(),
                                         [=](benchmark::State& s) {
                                           dense_stream_case(s, isa, fp8, cols, kind, threads, m);
                                         })
                ->UseRealTime();
          }
  }
  return 0;
}();

}  // namespace

BENCHMARK_MAIN();
