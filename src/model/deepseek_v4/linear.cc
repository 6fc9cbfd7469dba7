// model/deepseek_v4: linear dispatch between the reference ops and the cpu kernels.
#include "model/deepseek_v4/linear.h"

#include <algorithm>
#include <span>
#include <vector>

#include "core/check.h"
#include "core/quant.h"
#include "core/scratch.h"

namespace dsv4::v4 {
namespace {

// Grow-only per-thread buffers: allocation only when a larger shape than before arrives, never in a
// steady decode loop.
float* scratch(ScratchVec<float>& buf, int64_t n) { return buf.grow(n); }

// Below this many multiply-adds a GEMM runs on the calling thread: waking the pool costs more than it
// saves (~tens of µs per dispatch, far more when the machine is oversubscribed and a worker is not
// scheduled). The kernels give the same bits for any thread count, so this is a pure speed choice.
constexpr int64_t kMinPoolMacs = int64_t{1} << 20;

kernels::MatmulOptions options(const Execution& ex, const LinearWeight& w, int64_t n) {
  kernels::MatmulOptions o;
  o.round_bf16 = w.params.out_round == ref::OutRound::kBf16;
  o.isa = ex.isa;
  o.pool = n * w.params.n_out * w.params.n_in >= kMinPoolMacs ? ex.pool : nullptr;
  return o;
}

// The views' rows [r0, r0 + rows): whole 128-row scale blocks for FP8 (the loader guarantees it for wo_a).
LinearWeight row_slice(const LinearWeight& w, int64_t r0, int64_t rows) {
  LinearWeight s;
  s.params = w.params;
  s.params.n_out = rows;
  s.format = w.format;
  const int64_t k = w.params.n_in;
  switch (w.format) {
    case WeightFormat::kFp8:
      DSV4_CHECK(r0 % 128 == 0, "grouped_linear: FP8 groups must start on a scale block");
      s.fp8 = {w.fp8.codes + r0 * k, w.fp8.scales + (r0 / 128) * ((k + 127) / 128), rows, k};
      break;
    case WeightFormat::kFp4:
      s.fp4 = {w.fp4.packed + r0 * (k / 2), w.fp4.scales + r0 * (k / 32), rows, k};
      break;
    case WeightFormat::kBf16:
      s.bf16 = {w.bf16.data + r0 * k, rows, k};
      break;
    case WeightFormat::kF32:
      break;
  }
  return s;
}

}  // namespace

void linear(const Execution& ex, const LinearWeight& w, const float* x, int64_t n, float* y) {
  if (w.format == WeightFormat::kF32) {
    ref::linear(w.params, w.w.data(), x, n, y);
    return;
  }
  const int64_t k = w.params.n_in;
  if (w.params.act_quant == ref::ActQuant::kFp8Block128) {
    // Spec §3: per token, 1×128 K-blocks (k % 128 == 0, checked at load), so the whole [n, k] buffer
    // quantizes block by block exactly as ref::linear quantizes each row.
    thread_local ScratchVec<float> xq_buf;
    float* xq = scratch(xq_buf, n * k);
    std::copy_n(x, n * k, xq);
    fake_quant_fp8(std::span<float>(xq, static_cast<size_t>(n * k)), 128);
    x = xq;
  }
  const kernels::MatmulOptions opt = options(ex, w, n);
  switch (w.format) {
    case WeightFormat::kFp8: kernels::fp8_gemm(w.fp8, x, n, y, opt); break;
    case WeightFormat::kFp4: kernels::fp4_gemm(w.fp4, x, n, y, opt); break;
    case WeightFormat::kBf16: kernels::bf16_gemm(w.bf16, x, n, y, opt); break;
    case WeightFormat::kF32: break;
  }
}

void grouped_linear(const Execution& ex, const LinearWeight& w, int64_t n_groups, const float* x, int64_t n,
                    float* out) {
  const int64_t k = w.params.n_in, rows = w.params.n_out / n_groups;
  thread_local ScratchVec<float> xg_buf, yg_buf;
  float* xg = scratch(xg_buf, n * k);     // [n, k] this group's inputs
  float* yg = scratch(yg_buf, n * rows);  // [n, rows]
  for (int64_t g = 0; g < n_groups; ++g) {
    for (int64_t i = 0; i < n; ++i) std::copy_n(x + (i * n_groups + g) * k, k, xg + i * k);
    if (w.format == WeightFormat::kF32) {
      ref::LinearParams p = w.params;
      p.n_out = rows;
      ref::linear(p, w.w.data() + g * rows * k, xg, n, yg);
    } else {
      linear(ex, row_slice(w, g * rows, rows), xg, n, yg);
    }
    for (int64_t i = 0; i < n; ++i) std::copy_n(yg + i * rows, rows, out + (i * n_groups + g) * rows);
  }
}

}  // namespace dsv4::v4
