// kernels: block-scaled FP8 and FP4 weight matmuls on the CPU, reading the checkpoint's packed weights
// directly and decoding them in registers (no dequantized copy of a weight matrix ever exists).
// out[t, n] = Σ_k x[t, k] · w[n, k], fp32 accumulation, optionally rounded to bf16 (spec §2.0, §3).
//
// Activations are passed as floats holding the already fake-quantized values x_q·s_x (core/quant.h
// fake_quant_fp8, 1×128 blocks). Why floats rather than E4M3 codes + scales: every x_q·s_x is exact in
// fp32, so Σ (x_q s_x)(w_q s_w) is the spec's Σ_blocks (Σ x_q w_q)·s_x·s_w up to fp32 accumulation order;
// the activation row is tiny next to the weight stream (it lives in L1), so codes would save no bandwidth
// while forcing every caller through a second representation.
//
// One kernel name is carried through every tier: fp8_gemm / fp4_gemm (this API) → per-ISA row tiles
// (quant_matmul_{scalar,avx2,avx512}.cc) → bench cases "fp8_gemm/<isa>/m=<n_tokens>". A GEMV is the
// n_tokens = 1 case of the same kernel.
#pragma once

#include <cstdint>

#include "kernels/cpu/isa.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

// FP8 weight: codes [n_rows, n_cols] OCP E4M3FN; scales [ceil(n_rows/128), ceil(n_cols/128)] E8M0.
// NaN codes (0x7F, 0xFF) are not valid weights; the fast kernels do not special-case them.
struct Fp8Matrix {
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

// FP4 (MXFP4-compatible) weight: packed [n_rows, n_cols/2], two E2M1 codes per byte along K, the low
// nibble first; scales [n_rows, n_cols/32] E8M0. n_cols must be a multiple of 32.
struct Fp4Matrix {
  const uint8_t* packed = nullptr;
  const uint8_t* scales = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
};

// BF16 weight (the reference's "fp32 GEMM" on bf16 weights: head, MoE gate, compressor, indexer
// weights_proj, wo_a): data [n_rows, n_cols]. No activation quantization.
struct Bf16Matrix {
  const uint16_t* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  // Optional [n_rows]: bf16_rows_in_guard of these rows, so that the VDPBF16PS tile (kAvx512Bf16) need not
  // check every weight it loads on every call (at one token the check cost a third of the head's stream).
  // nullptr: the tile checks the rows it loads. Either way the same rows take the same path.
  const uint8_t* row_ok = nullptr;
};

// row_ok[r] = 1 when every weight of row r is zero, non-finite or at least 2^-56 in magnitude (the
// VDPBF16PS tile's weight guard, quant_tiles_bf16_avx512bf16.cc), else 0. w: [n_rows, k] bf16 bits.
void bf16_rows_in_guard(const uint16_t* w, int64_t n_rows, int64_t k, uint8_t* row_ok);

// The fewest tokens a GEMM runs on AMX by default (MatmulOptions, and the routed experts of the model). The
// AMX kernel is batch-invariant at every token count; per call it costs about the same from 1 to 16 tokens
// (the weight decode dominates), while the vector tiles' FMAs grow with the tokens: from DRAM, one core,
// CPU time per 32 MiB (bench *_gemm_stream/huge/threads=1): FP8 AVX-512 2.6 / 3.0 / 4.0 / 6.1 ms at 1 / 2
// / 4 / 8 tokens against AMX 2.7 / 2.8 / 2.9 / 3.0; BF16 2.4 / 2.5 / 2.6 / 3.8 against 2.6 / 2.5 / 2.4 /
// 2.5; FP4 at 1 / 2 tokens 2.7 / 3.4 (k 4096) and 3.0 / 3.8 (k 2048) against AMX 3.4 / 3.5 and 4.0 / 4.1.
// A routed expert sees 1-2 tokens of a decode batch (the medium model's batch 8: 69% of active experts see
// one), so it stays on the vector tiles until a call has many: routed experts on AMX at every count
// (--amx-routed-tokens 1, which would make them batch-invariant too) lost in the medium model, tokens per
// CPU-second at batch 1 4.08 / 4.15 against 4.45 / 4.56, batch 8 11.14 / 12.19 against 13.77 / 14.53
// (interleaved runs, kernels at e80b544). Why AMX FP4 cannot win at 1 token on these cores: quant_gemm_amx.cc.
inline constexpr int64_t kAmxMinTokensDefault = 16;

// Weight roles the AMX routing tells apart. kDense: a projection every row of a step goes through
// (attention wq_a/wq_b/wkv/wo_a/wo_b, indexer and compressor weights, the MoE gate and shared expert, the
// head, MTP's projections), so a decode batch of b streams gives it b tokens. kRoutedExpert: a routed MoE
// expert, which sees only the rows routed to it.
enum class WeightRole { kDense, kRoutedExpert };

// The fewest tokens a call runs on AMX, per weight role: the one place the model's choice lives (carried
// in its Execution, set from ModelOptions). Dense weights run on AMX at every token count by default: then
// each dense output is one fixed sequence of operations whatever the batch (batch invariance with AMX),
// and from 2 tokens AMX is the faster path (above). At 1 token it costs 3-9% more CPU time per call than
// the vector tiles; the medium model (dsv4 bench, quiet machine, probe 29-34 GB/s, interleaved runs) decoded
// batch 1 at 6.83 / 7.94 / 7.07 tok/s with dense from 1 against 8.10 / 7.39 / 8.19 with dense from 2
// (--amx-dense-tokens 2): ~7% at batch 1, within a run-to-run spread of about that size; batch 8 22.7-25.1
// either way (vector tiles below 16 rows, main at c78007b: batch 1 7.32 / 8.25, batch 8 18.3 / 21.5). Dense
// from 1 is kept for what dense from 2 would lose: a stream's logits would differ between decoding alone
// and decoding beside others. Routed experts keep kAmxMinTokensDefault.
struct AmxRouting {
  int64_t dense = 1;
  int64_t routed = kAmxMinTokensDefault;
  int64_t min_tokens(WeightRole role) const { return role == WeightRole::kDense ? dense : routed; }
};

struct MatmulOptions {
  bool round_bf16 = true;      // spec: quantized linears output bf16
  Isa isa = Isa::kAuto;        // forced ISA (tests, bench); unsupported requests fall back to the best
  ThreadPool* pool = nullptr;  // rows are split across the pool; nullptr runs on the calling thread
  // With AMX: calls of at least this many tokens run the AMX kernel. 1 puts every call on it (then every
  // output is one fixed sequence of operations at every token count: batch invariance on AMX too).
  int64_t amx_min_tokens = kAmxMinTokensDefault;
};

// x: [n_tokens, w.n_cols] (row stride n_cols), out: [n_tokens, w.n_rows] (row stride n_rows).
// Results are bit-identical for any thread count. Below opt.amx_min_tokens tokens (and always without
// AMX) they are also identical for any n_tokens: each output is one fixed sequence of fp32 operations.
// With AMX, calls of ≥ amx_min_tokens tokens whose activations are exact in bf16 (fake-quantized ones are)
// and k % 32 == 0 run on bf16 tiles (quant_gemm_amx.cc: same products, another summation order than the
// vector tiles, the same order at every token count). The scalar ISA accumulates in double.
void fp8_gemm(const Fp8Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt);
void bf16_gemm(const Bf16Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt);
void fp4_gemm(const Fp4Matrix& w, const float* x, int64_t n_tokens, float* out, const MatmulOptions& opt);

// The ISA whose code fp8_gemm / fp4_gemm run for this request (AMX serves k % 32 == 0 with bf16-exact
// activations from amx_min_tokens on; other calls run the AVX-512 tiles): bench case names.
Isa gemm_path_isa(Isa requested, int64_t n_tokens, int64_t n_cols, int64_t amx_min_tokens = kAmxMinTokensDefault);

// Bytes of weight data (codes + scales) a kernel streams once per call: the bandwidth figure of bench.
int64_t fp8_weight_bytes(const Fp8Matrix& w);
int64_t bf16_weight_bytes(const Bf16Matrix& w);
int64_t fp4_weight_bytes(const Fp4Matrix& w);

}  // namespace dsv4::kernels
