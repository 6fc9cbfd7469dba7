// tools: `dsv4 bench` — the machine's read bandwidth (its own STREAM-like probe), then the quantized
// weight kernels at real DeepSeek-V4-Flash shapes: decode GEMV as achieved GB/s of weight bytes and its
// ratio to the probe (decode is bandwidth-bound), prefill GEMM as GFLOP/s, and the per-token attention
// cost of a CSA layer against dense attention as the context grows (bench_attention.cc).
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "bench_attention.h"
#include "bench_compute.h"
#include "bench_model.h"
#include "bench_util.h"
#include "command.h"
#include "core/dtype.h"
#include "core/host_memory.h"
#include "core/numa.h"
#include "core/quant.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "core/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/moe_layer.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/read_probe.h"
#include "model_flags.h"

namespace dsv4::cli {
namespace {

using kernels::Isa;
using bench::splitmix;
using bench::time_per_call;

constexpr int64_t kMiB = 1024 * 1024;

constexpr const char* kUsage =
    "usage: dsv4 bench [--model DIR [--model-only]] [--attention-only] [--json] [--threads N] [--isa "
    "auto|scalar|avx2|avx512|avx512bf16|amx]\n"
    "                  [--probe-mb MB] [--working-set-mb MB] [--min-time SECONDS] [--contexts N,N,...]\n"
    "                  [--prefill-tokens N] [--decode-prompt N] [--decode-steps N] [--batches N,N,...]\n"
    "                  [--gemm-tokens N,N,...] [--backend cpu|reference]\n"
    "                  [--weights auto|copy|mmap] [--numa auto|distribute|isolate|off]\n"
    "                  [--amx-dense-tokens N] [--amx-routed-tokens N]\n"
    "  Measures read bandwidth, then FP4/FP8 GEMV (decode) and GEMM (prefill) kernels at V4-Flash shapes.\n"
    "  --model: also the checkpoint's weight bytes per decode token and the tokens/s the probe allows, then the\n"
    "  model itself: prefill tokens/s and GFLOP/s (--prefill-tokens, default 128), decode tokens/s at batch\n"
    "  1, 4, 8 or --batches (--decode-steps after a --decode-prompt per sequence, default 16 / 16) with the weight "
    "bytes\n"
    "  each step reads from the run's own routing, achieved GB/s and its ratio to the probe, tokens per CPU\n"
    "  second (steady under load with --threads 1), the speedup over batch 1 and its bandwidth ceiling\n"
    "  b * bytes_step(1) / bytes_step(b) (more distinct experts per step: a lower ceiling), and the fraction.\n"
    "  --probe-mb / --working-set-mb default to 4x / 2x the last-level cache (at least 1024 / 512 MiB)\n"
    "  so that both read DRAM, not cache (each at most 90% of MemAvailable). The probe runs on 4 KiB pages and\n"
    "  on 2 MiB huge pages; every ratio uses the higher of the two (the model rows: a second, shorter probe\n"
    "  taken right before them) (the GEMV and MoE weight copies sit on huge pages, as the model's do).\n"
    "  --weights: how the model section holds the checkpoint (see dsv4 generate --help); the load time, the\n"
    "  mode chosen and the process's huge-page bytes after load are printed.\n"
    "  --numa (see dsv4 generate --help): the plan pins the bench's threads and places the probe buffers and\n"
    "  the model's weights; the topology, the plan and the weights' resident bytes per node are printed.\n"
    "  Compute probe: the peak GFLOP/s of the instruction each tile family multiplies with (fp32 FMA zmm for\n"
    "  the bf16, fp8 and fp4 tiles, vdpbf16ps zmm for comparison, AMX tdpbf16ps for dense GEMMs and expert\n"
    "  GEMMs of >= 16 tokens: --amx-*-tokens, vpdpbusd zmm for the lightning indexer's dots), per core (flops\n"
    "  per thread CPU-second) and on all --threads (wall). A GEMM or decode row\n"
    "  of F flops in t seconds is then at F / t / peak of its\n"
    "  instructions' compute peak (decode: sum over weight families of flops / peak, weight matmuls only) and\n"
    "  at bytes / t / probe of the read bandwidth: the row is bound by whichever fraction is nearer 100%.\n"
    "  Each decode row is followed by where its wall time went, seen from the calling thread: per phase (the\n"
    "  attention, MoE gate, MoE expert and head matmul dispatches; attention core, mHC, routing, head mix, the\n"
    "  rest) its ms per token and share, and for the matmuls their weight MB per token and the GB/s and\n"
    "  fraction of the probe each achieved over its own dispatches: the kernels in the model against the\n"
    "  decode GEMV rows, and the serial time between dispatches ('= outside'). Beside each wall figure, the CPU\n"
    "  time of the model's threads in the phase (the caller's and every pool worker's clock; spin-waits count:\n"
    "  a worker polls ~50 us for the next job before it sleeps) and cpu/wall, and for the matmuls their bytes\n"
    "  per CPU-second over the probe's: the figures to A/B on a shared machine, where another process's load\n"
    "  stretches wall time but not CPU time.\n"
    "  --model-only: only the probes (read bandwidth and compute peaks: the ratios need them) and the model\n"
    "  section; no GEMV, MoE layer, prefill GEMM or attention rows.\n"
    "  --amx-dense-tokens / --amx-routed-tokens: the model's AMX routing (kernels::AmxRouting): the fewest rows\n"
    "  a dense projection (attention, indexer, compressor, gate, shared expert, head) / a routed expert's call\n"
    "  runs on AMX with; defaults 1 / 16.\n"
    "  --attention-only: only the compute probes and the attention section (no read probe, GEMV, MoE, prefill\n"
    "  GEMM or model rows).\n"
    "  --contexts: the context lengths of the attention section (default 1024,4096,16384,65536): per-token\n"
    "  cost of one CSA layer (indexer + top-k + sparse core, the model's shapes) against dense attention, and\n"
    "  on AVX-512 CPUs with VNNI its arithmetic floor: q.k + P.V at the fp32 FMA's probed peak plus the\n"
    "  indexer's dots at VPDPBUSD's, each part's time over its floor, and the best 64K / 4K ratio they allow.\n"
    "  --gemm-tokens: the token counts m of the prefill GEMM rows (default 1,4,8,16,64,256).\n";

enum class Kind { kFp4, kFp8, kBf16 };

struct Shape {
  const char* name;  // checkpoint tensor this shape comes from (spec §3)
  Kind kind;
  int64_t n_rows, n_cols;
};

const char* kernel_family(Kind k) { return k == Kind::kFp4 ? "fp4_gemm/" : k == Kind::kFp8 ? "fp8_gemm/" : "bf16_gemm/"; }

// The model's AMX routing role of a shape: the FP4 shapes are routed experts, the others dense.
kernels::WeightRole role_of(Kind k) { return k == Kind::kFp4 ? kernels::WeightRole::kRoutedExpert : kernels::WeightRole::kDense; }

// Decode-time matrices of one V4-Flash layer (spec §3 table).
const Shape kShapes[] = {
    {"ffn.experts.w1/w3", Kind::kFp4, 2048, 4096},
    {"ffn.experts.w2", Kind::kFp4, 4096, 2048},
    {"attn.wq_a", Kind::kFp8, 1024, 4096},
    {"attn.wq_b", Kind::kFp8, 32768, 1024},
    {"attn.wkv", Kind::kFp8, 512, 4096},
    {"attn.wo_b", Kind::kFp8, 4096, 8192},
    {"ffn.shared_experts.w1/w3", Kind::kFp8, 2048, 4096},
    {"ffn.shared_experts.w2", Kind::kFp8, 4096, 2048},
    {"attn.wo_a (bf16)", Kind::kBf16, 8192, 4096},
    {"attn.compressor.wkv (r=4)", Kind::kBf16, 1024, 4096},
    {"ffn.gate", Kind::kBf16, 256, 4096},
};

// The bench's weight copies on 2 MiB pages, where the model's weights sit (--weights auto/copy): on 4 KiB
// pages a decode GEMV streams ~1.5x slower per core (TLB walks every 4 KiB of each row stream; measured
// with dsv4_bench's fp8/bf16_gemm_stream cases), which would be read as a kernel that misses the probe.
// Allocations of at least one huge page are 2 MiB-aligned and MADV_HUGEPAGE before first touch.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    void* p = nullptr;
    if (bytes >= kHugePageBytes) {
      const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
      p = std::aligned_alloc(kHugePageBytes, rounded);
#if defined(MADV_HUGEPAGE)
      if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: 4 KiB pages if refused
#endif
    } else {
      p = std::malloc(bytes > 0 ? bytes : 1);
    }
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};
using HugeBytes = std::vector<uint8_t, HugePageAllocator<uint8_t>>;

void fill_codes(HugeBytes& v, uint64_t seed, bool fp8) {
  for (size_t i = 0; i < v.size(); i += 8) {
    uint64_t r = splitmix(seed);
    // Clearing bit 4 of every byte keeps FP8 codes away from the NaN patterns 0x7F / 0xFF.
    if (fp8) r &= 0xEFEFEFEFEFEFEFEFull;
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, v.size() - i));
  }
}

void fill_scales(HugeBytes& v, uint64_t seed) {
  for (auto& s : v) s = static_cast<uint8_t>(120 + splitmix(seed) % 8);
}

// One matrix's storage (codes + scales) in the checkpoint layout.
struct Weights {
  HugeBytes codes, scales;
  std::vector<uint8_t> row_ok;  // BF16: each row's VDPBF16PS guard, found once as the model's loader does
};

Weights make_weights(const Shape& s, uint64_t seed) {
  Weights w;
  if (s.kind == Kind::kBf16) {
    // Random finite bf16 in ±[2^-8, 2^-6): 0x3B.. / 0xBB.. high bytes.
    w.codes.resize(static_cast<size_t>(2 * s.n_rows * s.n_cols));
    fill_codes(w.codes, seed, false);
    for (size_t i = 1; i < w.codes.size(); i += 2) w.codes[i] = static_cast<uint8_t>((w.codes[i] & 0x80) | 0x3B);
    w.row_ok.resize(static_cast<size_t>(s.n_rows));
    kernels::bf16_rows_in_guard(reinterpret_cast<const uint16_t*>(w.codes.data()), s.n_rows, s.n_cols, w.row_ok.data());
    return w;
  }
  if (s.kind == Kind::kFp4) {
    w.codes.resize(static_cast<size_t>(s.n_rows * s.n_cols / 2));
    w.scales.resize(static_cast<size_t>(s.n_rows * s.n_cols / 32));
  } else {
    w.codes.resize(static_cast<size_t>(s.n_rows * s.n_cols));
    w.scales.resize(static_cast<size_t>(((s.n_rows + 127) / 128) * ((s.n_cols + 127) / 128)));
  }
  fill_codes(w.codes, seed, s.kind == Kind::kFp8);
  fill_scales(w.scales, seed + 1);
  return w;
}

std::vector<float> make_activations(int64_t m, int64_t k, uint64_t seed) {
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = static_cast<float>(static_cast<int64_t>(splitmix(seed) % 2001) - 1000) / 500.0f;
  fake_quant_fp8(x, 128);  // what the model passes: 1x128 fake-quantized activations
  return x;
}

void run_gemm(const Shape& s, const Weights& w, const float* x, int64_t m, float* out,
              const kernels::MatmulOptions& opt) {
  if (s.kind == Kind::kBf16) {
    const auto* data = reinterpret_cast<const uint16_t*>(w.codes.data());
    kernels::bf16_gemm(kernels::Bf16Matrix{data, s.n_rows, s.n_cols, w.row_ok.data()}, x, m, out, opt);
  } else if (s.kind == Kind::kFp4) {
    kernels::fp4_gemm(kernels::Fp4Matrix{w.codes.data(), w.scales.data(), s.n_rows, s.n_cols}, x, m, out, opt);
  } else {
    kernels::fp8_gemm(kernels::Fp8Matrix{w.codes.data(), w.scales.data(), s.n_rows, s.n_cols}, x, m, out, opt);
  }
}

int64_t matrix_bytes(const Shape& s) {
  switch (s.kind) {
    case Kind::kFp4:
      return s.n_rows * s.n_cols / 2 + s.n_rows * s.n_cols / 32;
    case Kind::kFp8:
      return s.n_rows * s.n_cols + ((s.n_rows + 127) / 128) * ((s.n_cols + 127) / 128);
    case Kind::kBf16:
      break;
  }
  return 2 * s.n_rows * s.n_cols;
}

// Weight bytes one decode token reads from a checkpoint (spec §3 names): every backbone tensor in full,
// except the routed experts (n_activated of n_routed per layer), the embedding and the hash-routing tables
// (one row each). MTP / DSpark stages (speculative decoding only) are counted separately.
struct DecodeBytes {
  double backbone = 0, routed = 0, mtp = 0;
};

Result<DecodeBytes> decode_bytes(const std::string& dir) {
  DSV4_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  DSV4_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  DecodeBytes b;
  const double active = static_cast<double>(cfg.n_activated_experts) / static_cast<double>(cfg.n_routed_experts);
  for (const TensorInfo& t : ckpt.tensors()) {
    const double bytes = static_cast<double>(t.data.size());
    const bool row_read = t.name == "embed.weight" || t.name.find("ffn.gate.tid2eid") != std::string::npos;
    const double read = row_read && !t.shape.empty() ? bytes / static_cast<double>(t.shape[0]) : bytes;
    if (t.name.rfind("mtp.", 0) == 0) {
      b.mtp += read;
    } else if (t.name.find(".ffn.experts.") != std::string::npos) {
      b.routed += read * active;
    } else {
      b.backbone += read;
    }
  }
  return b;
}

// The machine's read-bandwidth limit: the better page kind of the probe, for each figure.
struct ProbeLimit {
  double best_gbps = 0;
  double best_cpu_gbps = 0;
};

// ", 1024 of 1024 MiB on huge pages" — what the kernel granted, so a huge-page figure is not taken on trust.
std::string huge_note(const kernels::ReadProbeResult& p) {
  if (!p.huge_page_bytes) return "";
  return ", " + std::to_string(*p.huge_page_bytes / kMiB) + " of " + std::to_string(p.bytes / kMiB) + " MiB on huge pages";
}

// "N,N,..." with every N in [lo, hi]; an empty item, a non-number or one out of range is an error.
Result<std::vector<int64_t>> parse_int_list(const std::string& list, int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= list.size()) {
    const size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < lo || v > hi)
      return invalid_argument("bench.bad_list", "'" + item + "' is not an integer in [" + std::to_string(lo) + ", " +
                                                    std::to_string(hi) + "]");
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

// 2-4. The quantized weight kernels at V4-Flash shapes: decode GEMV streamed from DRAM, one MoE layer at
// decode, prefill GEMM (cache-resident), each against the probe (and the compute peaks).
void bench_weight_kernels(int64_t ws_mb, const std::vector<int64_t>& gemm_tokens, double min_time, Isa used,
                          ThreadPool* pool, const kernels::AmxRouting& amx, const ProbeLimit& probe, const bench::ComputePeaks& peaks, bool json, nlohmann::json& report) {
  if (!json) {
    std::printf("decode GEMV (m=1), weights streamed from DRAM (%lld MiB working set on huge pages):\n",
                static_cast<long long>(ws_mb));
    std::printf("  %-28s %-24s %12s %9s %8s %9s\n", "tensor", "kernel", "shape", "us/call", "GB/s", "of probe");
  }

  // 2. Decode GEMV: cycle through enough distinct copies of each matrix that the set exceeds the cache.
  nlohmann::json gemv = nlohmann::json::array();
  std::optional<uint64_t> gemv_anon_huge;
  for (const Shape& s : kShapes) {
    const int64_t bytes = matrix_bytes(s);
    const int64_t copies = std::max<int64_t>(1, (ws_mb * kMiB + bytes - 1) / bytes);
    std::vector<Weights> ws;
    ws.reserve(static_cast<size_t>(copies));
    for (int64_t c = 0; c < copies; ++c) ws.push_back(make_weights(s, 1000 + static_cast<uint64_t>(c)));
    if (const HugePageUsage u = process_huge_pages(); u.known)
      gemv_anon_huge = std::max(gemv_anon_huge.value_or(0), u.anon_huge_bytes);
    const std::vector<float> x = make_activations(1, s.n_cols, 7);
    std::vector<float> out(static_cast<size_t>(s.n_rows));
    const int64_t amx_min = amx.min_tokens(role_of(s.kind));
    const kernels::MatmulOptions opt{true, used, pool, amx_min};
    const double sec = time_per_call(min_time, copies, [&](int64_t i) {
      run_gemm(s, ws[static_cast<size_t>(i % copies)], x.data(), 1, out.data(), opt);
    });
    const double gbps = static_cast<double>(bytes) / sec / 1e9;
    const std::string kernel =
        kernel_family(s.kind) + std::string(kernels::isa_name(kernels::gemm_path_isa(used, 1, s.n_cols, amx_min))) + "/m=1";
    const std::string shape = std::to_string(s.n_rows) + "x" + std::to_string(s.n_cols);
    gemv.push_back({{"tensor", s.name},
                    {"kernel", kernel},
                    {"n_rows", s.n_rows},
                    {"n_cols", s.n_cols},
                    {"weight_bytes", bytes},
                    {"us_per_call", sec * 1e6},
                    {"gbps", gbps},
                    {"ratio_to_probe", gbps / probe.best_gbps}});
    if (!json)
      std::printf("  %-28s %-24s %12s %9.1f %8.1f %8.0f%%\n", s.name, kernel.c_str(), shape.c_str(), sec * 1e6, gbps,
                  100.0 * gbps / probe.best_gbps);
  }
  report["decode_gemv"] = gemv;
  // What the kernel granted: the process's anonymous huge-page bytes at the largest row's copies.
  report["decode_gemv_pages"] = {{"kind", "huge"}};
  if (gemv_anon_huge) report["decode_gemv_pages"]["max_anon_huge_bytes"] = *gemv_anon_huge;
  if (!json && gemv_anon_huge)
    std::printf("  (weight copies on huge pages: up to %.0f MiB of the process on huge pages as granted)\n",
                static_cast<double>(*gemv_anon_huge) / kMiB);

  // 3. One MoE layer at decode (1 token, 6 of n routed FP4 experts + the FP8 shared expert), with enough
  // distinct experts that they do not fit in cache; the routing changes every call.
  {
    const Shape w13 = kShapes[0], w2 = kShapes[1], s13 = kShapes[6], s2 = kShapes[7];
    const int64_t expert_bytes = 2 * matrix_bytes(w13) + matrix_bytes(w2);
    const int64_t n_experts = std::max<int64_t>(8, (ws_mb * kMiB + expert_bytes - 1) / expert_bytes);
    std::vector<Weights> store;
    store.reserve(static_cast<size_t>(3 * n_experts + 3));
    std::vector<kernels::Fp4Expert> experts(static_cast<size_t>(n_experts));
    auto fp4m = [&](const Shape& s) {
      store.push_back(make_weights(s, 5000 + store.size()));
      return kernels::Fp4Matrix{store.back().codes.data(), store.back().scales.data(), s.n_rows, s.n_cols};
    };
    auto fp8m = [&](const Shape& s) {
      store.push_back(make_weights(s, 5000 + store.size()));
      return kernels::Fp8Matrix{store.back().codes.data(), store.back().scales.data(), s.n_rows, s.n_cols};
    };
    for (auto& e : experts) {
      e.w1 = fp4m(w13);
      e.w3 = fp4m(w13);
      e.w2 = fp4m(w2);
    }
    kernels::Fp8Expert shared{fp8m(s13), fp8m(s13), fp8m(s2)};
    const int64_t shared_bytes = 2 * matrix_bytes(s13) + matrix_bytes(s2);
    constexpr int64_t kTopK = 6;
    const std::vector<float> x = make_activations(1, 4096, 11);
    std::vector<float> y(4096);
    std::vector<int32_t> ids(kTopK);
    const std::vector<float> rw(kTopK, 0.25f);
    kernels::MoeLayerScratch scratch;
    const kernels::MoeLayerWeights lw{experts.data(), n_experts, &shared, 10.0f, amx.dense};
    const kernels::MatmulOptions opt{true, used, pool, amx.routed};
    uint64_t seed = 77;
    const double sec = time_per_call(min_time, n_experts / kTopK + 1, [&](int64_t) {
      for (int64_t j = 0; j < kTopK; ++j) {  // six distinct experts
        int32_t e;
        bool dup;
        do {
          e = static_cast<int32_t>(splitmix(seed) % static_cast<uint64_t>(n_experts));
          dup = std::find(ids.begin(), ids.begin() + j, e) != ids.begin() + j;
        } while (dup);
        ids[static_cast<size_t>(j)] = e;
      }
      kernels::moe_layer(lw, x.data(), 1, ids.data(), rw.data(), kTopK, y.data(), scratch, opt);
    });
    const int64_t bytes = kTopK * expert_bytes + shared_bytes;
    const double gbps = static_cast<double>(bytes) / sec / 1e9;
    const std::string kernel =
        std::string("moe_layer/") + kernels::isa_name(kernels::gemm_path_isa(used, 1, 4096, amx.routed)) + "/m=1";
    report["decode_moe_layer"] = {{"kernel", kernel},
                                  {"n_experts_in_memory", n_experts},
                                  {"weight_bytes_per_token", bytes},
                                  {"us_per_call", sec * 1e6},
                                  {"gbps", gbps},
                                  {"ratio_to_probe", gbps / probe.best_gbps}};
    if (!json)
      std::printf("  %-28s %-24s %12s %9.1f %8.1f %8.0f%%\n", "moe layer (6 routed+shared)",
                  kernel.c_str(),
                  (std::to_string(bytes / 1000000) + " MB").c_str(), sec * 1e6, gbps, 100.0 * gbps / probe.best_gbps);
  }

  // 4. Prefill GEMM: one copy (compute-bound once a row block is reused across tokens).
  if (!json) {
    std::printf("\nprefill GEMM (one copy, cache-resident; of peak: GFLOP/s over the peak of the tile's instruction):\n"
                "  %-28s %-24s %6s %10s %9s %8s %9s %-14s %8s\n",
                "tensor", "kernel", "m", "ms/call", "GFLOP/s", "GB/s", "of probe", "peak insn", "of peak");
  }
  nlohmann::json gemm = nlohmann::json::array();
  for (const Shape& s : {kShapes[0], kShapes[5], kShapes[8]}) {
    const Weights w = make_weights(s, 42);
    for (const int64_t m : gemm_tokens) {
      const std::vector<float> x = make_activations(m, s.n_cols, 9);
      std::vector<float> out(static_cast<size_t>(m * s.n_rows));
      const int64_t amx_min = amx.min_tokens(role_of(s.kind));
      const kernels::MatmulOptions opt{true, used, pool, amx_min};
      const double sec =
          time_per_call(min_time, 2, [&](int64_t) { run_gemm(s, w, x.data(), m, out.data(), opt); });
      const double gflops = 2.0 * static_cast<double>(m * s.n_rows * s.n_cols) / sec / 1e9;
      const std::string kernel = std::string(kernel_family(s.kind)) +
                                 kernels::isa_name(kernels::gemm_path_isa(used, m, s.n_cols, amx_min)) + "/m=" + std::to_string(m);
      const double gbps = static_cast<double>(matrix_bytes(s)) / sec / 1e9;
      // make_activations fake-quantizes: bf16-exact, as the model's FP8/FP4 inputs are.
      const auto insn = bench::gemm_insn(used, m, s.n_cols, true, amx_min);
      const kernels::ComputePeak* peak = insn ? peaks.get(*insn) : nullptr;
      nlohmann::json row = {{"tensor", s.name}, {"kernel", kernel},          {"m", m},
                            {"ms_per_call", sec * 1e3}, {"gflops", gflops}, {"gbps", gbps},
                            {"ratio_to_probe", gbps / probe.best_gbps}};
      if (peak != nullptr) {
        row["peak_insn"] = kernels::compute_insn_name(peak->insn);
        row["ratio_to_compute_peak"] = gflops / peak->threads_gflops;
      }
      gemm.push_back(row);
      if (!json)
        std::printf("  %-28s %-24s %6lld %10.3f %9.1f %8.1f %8.0f%% %-14s %7.0f%%\n", s.name, kernel.c_str(),
                    static_cast<long long>(m), sec * 1e3, gflops, gbps, 100.0 * gbps / probe.best_gbps,
                    peak ? kernels::compute_insn_name(peak->insn) : "-", peak ? 100.0 * gflops / peak->threads_gflops : 0.0);
    }
  }
  report["prefill_gemm"] = gemm;
}

int cmd_bench(int argc, char** argv) {
  auto parsed = Args::parse(argc, argv, {"--model", "--threads", "--isa", "--probe-mb", "--working-set-mb", "--min-time", "--contexts",
                             "--prefill-tokens", "--decode-steps", "--decode-prompt", "--batches", "--gemm-tokens", "--backend", "--weights", "--numa",
                             "--amx-dense-tokens", "--amx-routed-tokens"},
                            {"--json", "--help", "--model-only", "--attention-only"});
  if (!parsed.is_ok()) {
    std::fputs(kUsage, stderr);
    return report_error("bench", parsed.status());
  }
  const Args& args = *parsed;
  if (args.has("--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  auto threads = args.get_int("--threads", 0, 0, 4096);
  if (!threads.is_ok()) return report_error("bench", threads.status());
  const kernels::AmxRouting amx_default;
  auto amx_dense = args.get_int("--amx-dense-tokens", amx_default.dense, 1, 1 << 20);
  auto amx_routed = args.get_int("--amx-routed-tokens", amx_default.routed, 1, 1 << 20);
  if (!amx_dense.is_ok()) return report_error("bench", amx_dense.status());
  if (!amx_routed.is_ok()) return report_error("bench", amx_routed.status());
  const kernels::AmxRouting amx{*amx_dense, *amx_routed};
  Isa isa = Isa::kAuto;
  if (!kernels::parse_isa(args.get_or("--isa", "auto").c_str(), &isa))
    return report_error("bench", invalid_argument("bench.bad_isa", "unknown --isa " + args.get_or("--isa", "")));
  const int64_t llc = kernels::last_level_cache_bytes();
  auto probe_mb = args.get_int("--probe-mb", std::max<int64_t>(1024, 4 * llc / kMiB), 1, 1 << 20);
  auto ws_mb = args.get_int("--working-set-mb", std::max<int64_t>(512, 2 * llc / kMiB), 1, 1 << 20);
  auto min_time = args.get_double("--min-time", 0.5, 0.01, 600);
  if (!probe_mb.is_ok()) return report_error("bench", probe_mb.status());
  if (!ws_mb.is_ok()) return report_error("bench", ws_mb.status());
  if (!min_time.is_ok()) return report_error("bench", min_time.status());
  // Buffers larger than the memory the kernel can give would abort the mapping or be OOM-killed when
  // touched, minutes into a run: refuse them here (MemAvailable, with a tenth kept for everything else).
  if (const auto avail = mem_available_bytes()) {
    const uint64_t limit = *avail / 10 * 9;
    const auto check = [&](int64_t mb, const char* flag, const char* rule) -> Status {
      if (static_cast<uint64_t>(mb) * kMiB <= limit) return Status::ok();
      return invalid_argument(rule, std::string(flag) + " " + std::to_string(mb) + " MiB exceeds 90% of MemAvailable (" +
                                        std::to_string(*avail / kMiB) + " MiB): lower it");
    };
    if (Status st = check(*probe_mb, "--probe-mb", "bench.probe_too_large"); !st.is_ok()) return report_error("bench", st);
    if (Status st = check(*ws_mb, "--working-set-mb", "bench.working_set_too_large"); !st.is_ok())
      return report_error("bench", st);
  }
  const bool json = args.has("--json");
  const bool model_only = args.has("--model-only");
  if (model_only && !args.get("--model"))
    return report_error("bench", invalid_argument("bench.model_only_needs_model", "--model-only needs --model DIR"));
  const bool attention_only = args.has("--attention-only");
  if (attention_only && model_only)
    return report_error("bench", invalid_argument("bench.attention_only_and_model_only",
                                                  "--attention-only and --model-only exclude each other"));
  auto contexts = parse_int_list(args.get_or("--contexts", "1024,4096,16384,65536"), 1, int64_t{1} << 22);
  if (!contexts.is_ok())
    return report_error("bench", invalid_argument("bench.bad_contexts", "--contexts wants N,N,... in [1, 4194304]"));
  auto batches = parse_int_list(args.get_or("--batches", "1,4,8"), 1, 4096);
  if (!batches.is_ok())
    return report_error("bench", invalid_argument("bench.bad_batches", "--batches wants N,N,... in [1, 4096]"));
  auto gemm_tokens = parse_int_list(args.get_or("--gemm-tokens", "1,4,8,16,64,256"), 1, 4096);
  if (!gemm_tokens.is_ok())
    return report_error("bench", invalid_argument("bench.bad_gemm_tokens", "--gemm-tokens wants N,N,... in [1, 4096]"));
  std::optional<ModelConfig> model_cfg;
  auto prefill_tokens = args.get_int("--prefill-tokens", 128, 1, 1 << 20);
  auto decode_steps = args.get_int("--decode-steps", 16, 1, 1 << 20);
  auto decode_prompt = args.get_int("--decode-prompt", 16, 1, 1 << 20);
  if (!prefill_tokens.is_ok()) return report_error("bench", prefill_tokens.status());
  if (!decode_steps.is_ok()) return report_error("bench", decode_steps.status());
  if (!decode_prompt.is_ok()) return report_error("bench", decode_prompt.status());
  Backend backend = Backend::kCpu;
  if (!parse_backend(args.get_or("--backend", "cpu").c_str(), &backend))
    return report_error("bench", invalid_argument("bench.bad_backend", "--backend must be cpu or reference"));
  auto weights = parse_weights_flag(args);
  if (!weights.is_ok()) return report_error("bench", weights.status());

  std::optional<DecodeBytes> model_bytes;
  if (auto dir = args.get("--model")) {
    auto r = decode_bytes(*dir);
    if (!r.is_ok()) return report_error("bench", r.status());
    model_bytes = *r;
    auto c = load_model_config(*dir);
    if (!c.is_ok()) return report_error("bench", c.status());
    model_cfg = std::move(*c);
  }

  auto numa_mode = parse_numa_flag(args);
  if (!numa_mode.is_ok()) return report_error("bench", numa_mode.status());
  // The same NUMA plan as the model's (Model::load): the probes then measure what decode can reach.
  auto topology = read_numa_topology();
  if (!topology.is_ok() && *numa_mode != NumaMode::kOff) return report_error("bench", topology.status());
  NumaPlan numa_plan;
  numa_plan.n_threads = static_cast<int>(*threads);
  if (*numa_mode != NumaMode::kOff) {
    auto plan = plan_numa(*topology, *numa_mode, static_cast<int>(*threads), current_cpu());
    if (!plan.is_ok()) return report_error("bench", plan.status());
    numa_plan = std::move(*plan);
  }
  ThreadPool pool(numa_plan.n_threads, numa_plan.pinned() ? numa_plan.thread_cpus : std::vector<std::vector<int>>{});
  numa_plan.n_threads = pool.n_threads();
  const Isa used = kernels::resolve_isa(isa);
  nlohmann::json report;
  report["threads"] = pool.n_threads();
  report["numa"] = {{"mode", numa_mode_name(numa_plan.mode)}, {"plan", describe_plan(numa_plan)}};
  if (topology.is_ok()) report["numa"]["topology"] = describe_topology(*topology);
  if (pool.pin_failures() > 0) report["numa"]["pin_failures"] = pool.pin_failures();
  report["isa"] = kernels::isa_name(used);
  report["llc_bytes"] = llc;
  report["model_only"] = model_only;

  // --attention-only: section 5 alone, with the compute probes its arithmetic floor is read against (no read
  // probe: at these sizes the attention's state is cache-resident or a few rows per block).
  if (attention_only) {
    if (!json) std::printf("machine: %d threads, isa %s\n", pool.n_threads(), kernels::isa_name(used));
    const bench::ComputePeaks peaks = bench::run_compute_probes(&pool, *min_time, json);
    report["compute_probe"] = bench::compute_peaks_json(peaks);
    const bench::AttentionBenchShape ashape = model_cfg ? bench::attention_shape(*model_cfg) : bench::AttentionBenchShape{};
    report["attention"] = bench::bench_attention(ashape, *contexts, *min_time, used, &pool, json, &peaks);
    if (json) std::printf("%s\n", report.dump(2).c_str());
    return 0;
  }

  // 1. Read bandwidth, on 4 KiB pages and on huge pages; the machine's limit is the higher of each figure.
  if (!json)
    std::printf("machine: %d threads, isa %s, LLC %.0f MiB\n", pool.n_threads(), kernels::isa_name(used),
                static_cast<double>(llc) / kMiB);
  if (!json) {
    std::printf("numa: %s; %s", topology.is_ok() ? describe_topology(*topology).c_str() : "topology unknown",
                describe_plan(numa_plan).c_str());
    if (pool.pin_failures() > 0) std::printf(" (%d threads could not be pinned)", pool.pin_failures());
    std::printf("\n");
  }
  ProbeLimit probe;
  report["read_probe"] = nlohmann::json::object();
  for (PageKind pages : {PageKind::kSmall, PageKind::kHuge}) {
    const auto probed = kernels::run_read_probe(*probe_mb * kMiB, 5, &pool, pages, numa_plan.weights);
    if (!probed.is_ok()) return report_error("bench", probed.status());
    const kernels::ReadProbeResult& p = *probed;
    probe.best_gbps = std::max(probe.best_gbps, p.best_gbps);
    probe.best_cpu_gbps = std::max(probe.best_cpu_gbps, p.best_cpu_gbps);
    nlohmann::json& j = report["read_probe"][page_kind_name(pages)];
    j = {{"bytes", p.bytes}, {"best_gbps", p.best_gbps}, {"mean_gbps", p.mean_gbps}, {"best_cpu_gbps", p.best_cpu_gbps}};
    if (p.huge_page_bytes) j["huge_page_bytes"] = *p.huge_page_bytes;
    if (!json)
      std::printf("read probe, %-4s pages: %.1f GB/s best, %.1f GB/s mean over %d passes of %.0f MiB; %.1f GB per "
                  "CPU-second%s\n",
                  page_kind_name(pages), p.best_gbps, p.mean_gbps, p.passes, static_cast<double>(p.bytes) / kMiB,
                  p.best_cpu_gbps, huge_note(p).c_str());
  }
  report["read_probe"]["best_gbps"] = probe.best_gbps;
  report["read_probe"]["best_cpu_gbps"] = probe.best_cpu_gbps;
  if (!json)
    std::printf("read probe: machine limit %.1f GB/s, %.1f GB per CPU-second (the higher of the two page kinds)\n\n",
                probe.best_gbps, probe.best_cpu_gbps);

  // 1b. Compute peaks (separate from the read probe above: its own section and JSON key).
  const bench::ComputePeaks peaks = bench::run_compute_probes(&pool, *min_time, json);
  report["compute_probe"] = bench::compute_peaks_json(peaks);

  if (model_bytes) {
    const double per_token = model_bytes->backbone + model_bytes->routed;
    report["model"] = {{"dir", *args.get("--model")},
                       {"weight_bytes_per_decode_token", per_token},
                       {"routed_expert_bytes_per_token", model_bytes->routed},
                       {"mtp_bytes_per_draft_token", model_bytes->mtp},
                       {"tokens_per_s_at_probe_bandwidth", probe.best_gbps * 1e9 / per_token}};
    if (!json)
      std::printf("model: %.3f GB of weights per decode token (%.3f GB routed experts; MTP %.3f GB per draft)\n"
                  "       -> at most %.2f tokens/s at the probe's bandwidth (the model section below measures it)\n\n",
                  per_token / 1e9, model_bytes->routed / 1e9, model_bytes->mtp / 1e9, probe.best_gbps * 1e9 / per_token);
  }

  // 2-5. The weight kernels and attention at V4-Flash shapes, unless --model-only.
  if (!model_only) {
    bench_weight_kernels(*ws_mb, *gemm_tokens, *min_time, used, &pool, amx, probe, peaks, json, report);
    // The model's CSA shapes (V4-Flash's without --model).
    const bench::AttentionBenchShape ashape = model_cfg ? bench::attention_shape(*model_cfg) : bench::AttentionBenchShape{};
    report["attention"] = bench::bench_attention(ashape, *contexts, *min_time, used, &pool, json, &peaks);
  }

  // 6. The model end to end: prefill, decode at batch 1/4/8 against the probe.
  if (model_cfg) {
    bench::ModelBenchOptions mo;
    mo.prefill_tokens = *prefill_tokens;
    mo.decode_steps = *decode_steps;
    mo.decode_prompt = *decode_prompt;
    mo.batches = *batches;
    mo.model.threads = pool.n_threads();
    mo.model.isa = isa;
    mo.model.amx = amx;
    mo.model.backend = backend;
    mo.model.weights.residency = *weights;
    mo.model.numa = *numa_mode;
    // The model rows' ratios use a probe taken right before them: on a shared machine the first probe
    // may have run under another load than the model does, minutes later. Both page kinds again (the
    // higher of each figure), 3 passes of at most 1 GiB: a second or two.
    ProbeLimit near;
    for (PageKind pages : {PageKind::kSmall, PageKind::kHuge}) {
      const auto p = kernels::run_read_probe(std::min<int64_t>(*probe_mb, 1024) * kMiB, 3, &pool, pages, numa_plan.weights);
      if (!p.is_ok()) return report_error("bench", p.status());
      near.best_gbps = std::max(near.best_gbps, p->best_gbps);
      near.best_cpu_gbps = std::max(near.best_cpu_gbps, p->best_cpu_gbps);
    }
    report["read_probe_before_model"] = {{"best_gbps", near.best_gbps}, {"best_cpu_gbps", near.best_cpu_gbps}};
    if (!json)
      std::printf("\nread probe again, right before the model section: %.1f GB/s, %.1f GB per CPU-second (first probe "
                  "%.1f, %.1f); the model rows' ratios use these\n",
                  near.best_gbps, near.best_cpu_gbps, probe.best_gbps, probe.best_cpu_gbps);
    mo.probe_gbps = near.best_gbps;
    mo.probe_cpu_gbps = near.best_cpu_gbps;
    mo.peaks = &peaks;
    mo.quiet = json;
    auto r = bench::bench_model(*args.get("--model"), mo);
    if (!r.is_ok()) return report_error("bench", r.status());
    report["model_run"] = std::move(*r);
  }
  if (json) std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

}  // namespace

DSV4_COMMAND("bench", "measure memory bandwidth and kernel throughput (GB/s, GFLOP/s)", cmd_bench);

}  // namespace dsv4::cli
