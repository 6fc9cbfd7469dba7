// model/deepseek_v4: linear dispatch between the reference ops and the cpu kernels.
#include "model/deepseek_v4/linear.h"

#include <algorithm>
#include <span>
#include <vector>

#include "core/check.h"
#include "core/quant.h"
#include "core/scratch.h"
#include "core/thread_pool.h"
#include "kernels/cpu/act_quant.h"
#include "model/deepseek_v4/dispatch_profile.h"

namespace dsv4::v4 {
namespace {

// Grow-only per-thread buffers: allocation only when a larger shape than before arrives, never in a
// steady decode loop.
float* scratch(ScratchVec<float>& buf, int64_t n) { return buf.grow(n); }

// Below this many multiply-adds a GEMM runs on the calling thread: waking the pool costs more than it
// saves (~tens of µs per dispatch, far more when the machine is oversubscribed and a worker is not
// scheduled). The kernels give the same bits for any thread count, so this is a pure speed choice.
constexpr int64_t kMinPoolMacs = int64_t{1} << 20;

kernels::MatmulOptions options(const Execution& ex, const LinearWeight& w, int64_t n, kernels::WeightRole role) {
  kernels::MatmulOptions o;
  o.round_bf16 = w.params.out_round == ref::OutRound::kBf16;
  o.isa = ex.isa;
  o.pool = n * w.params.n_out * w.params.n_in >= kMinPoolMacs ? ex.pool : nullptr;
  o.amx_min_tokens = ex.amx.min_tokens(role);
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
      s.bf16 = {w.bf16.data + r0 * k, rows, k, w.bf16.row_ok != nullptr ? w.bf16.row_ok + r0 : nullptr};
      break;
    case WeightFormat::kF32:
      break;
  }
  return s;
}

// Weight bytes one call streams (codes + scales): what the dispatch profile charges.
int64_t weight_bytes(const LinearWeight& w) {
  switch (w.format) {
    case WeightFormat::kFp8: return kernels::fp8_weight_bytes(w.fp8);
    case WeightFormat::kFp4: return kernels::fp4_weight_bytes(w.fp4);
    case WeightFormat::kBf16: return kernels::bf16_weight_bytes(w.bf16);
    case WeightFormat::kF32: break;
  }
  return 4 * w.params.n_out * w.params.n_in;
}

// The profile scope of one dispatch (bench only: the bytes are summed only when a profile is installed).
Phase dispatch_phase() { return DispatchProfile::active() ? DispatchProfile::matmul_phase() : Phase::kOther; }

}  // namespace

void linear(const Execution& ex, const LinearWeight& w, const float* x, int64_t n, float* y, kernels::WeightRole role) {
  const DispatchProfile::Scope timed(dispatch_phase(), DispatchProfile::active() ? weight_bytes(w) : 0);
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
    kernels::act_quant_fp8(x, xq, n * k, 128, /*bf16_first=*/false, ex.isa);
    x = xq;
  }
  const kernels::MatmulOptions opt = options(ex, w, n, role);
  switch (w.format) {
    case WeightFormat::kFp8: kernels::fp8_gemm(w.fp8, x, n, y, opt); break;
    case WeightFormat::kFp4: kernels::fp4_gemm(w.fp4, x, n, y, opt); break;
    case WeightFormat::kBf16: kernels::bf16_gemm(w.bf16, x, n, y, opt); break;
    case WeightFormat::kF32: break;
  }
}

namespace {

// Bytes of one weight row in its packed format.
int64_t row_bytes(const LinearWeight& w) {
  const int64_t k = w.params.n_in;
  switch (w.format) {
    case WeightFormat::kFp8: return k;
    case WeightFormat::kFp4: return k / 2;
    case WeightFormat::kBf16: return 2 * k;
    case WeightFormat::kF32: break;
  }
  return 4 * k;
}

// A job's rows [r0, r0 + rows).
struct RowChunk {
  int32_t job;
  int64_t r0, rows;
};

// ~1 MiB of weights per chunk: a few chunks per matrix, so two threads share even the small ones, while a
// chunk is still long enough for the kernels' prefetch to run ahead. Whole 128-row FP8 scale blocks.
constexpr int64_t kChunkBytes = int64_t{1} << 20;
constexpr int64_t kChunkRowQuantum = 128;

}  // namespace

void linear_jobs(const Execution& ex, std::span<const LinearJob> jobs, int64_t n) {
  bool fused = n == 1 && ex.backend == Backend::kCpu && ex.pool != nullptr && ex.pool->n_threads() > 1;
  for (const LinearJob& j : jobs) fused &= j.w->format != WeightFormat::kF32;
  if (!fused) {
    for (const LinearJob& j : jobs) linear(ex, *j.w, j.x, n, j.y);
    return;
  }
  int64_t profiled_bytes = 0;
  if (DispatchProfile::active())
    for (const LinearJob& j : jobs) profiled_bytes += weight_bytes(*j.w);
  const DispatchProfile::Scope timed(dispatch_phase(), profiled_bytes);
  // Inputs: FP8-quantized once per distinct x (spec §3, as linear() does), raw otherwise.
  thread_local std::vector<const float*> inputs;      // per job: what its kernel reads
  thread_local ScratchVec<float> quantized;           // the distinct quantized inputs, back to back
  thread_local std::vector<RowChunk> chunks;
  inputs.assign(jobs.size(), nullptr);
  int64_t q_len = 0;
  for (const LinearJob& j : jobs)
    if (j.w->params.act_quant == ref::ActQuant::kFp8Block128) q_len += j.w->params.n_in;
  float* qbuf = quantized.grow(q_len);
  int64_t q_used = 0;
  for (size_t a = 0; a < jobs.size(); ++a) {
    const LinearJob& j = jobs[a];
    if (j.w->params.act_quant != ref::ActQuant::kFp8Block128) {
      inputs[a] = j.x;
      continue;
    }
    for (size_t b = 0; b < a && inputs[a] == nullptr; ++b)  // the same x quantized for an earlier job
      if (jobs[b].x == j.x && jobs[b].w->params.act_quant == ref::ActQuant::kFp8Block128 &&
          jobs[b].w->params.n_in == j.w->params.n_in)
        inputs[a] = inputs[b];
    if (inputs[a] != nullptr) continue;
    const int64_t k = j.w->params.n_in;
    float* xq = qbuf + q_used;
    q_used += k;
    kernels::act_quant_fp8(j.x, xq, k, 128, /*bf16_first=*/false, ex.isa);
    inputs[a] = xq;
  }
  chunks.clear();
  for (size_t a = 0; a < jobs.size(); ++a) {
    const LinearWeight& w = *jobs[a].w;
    const int64_t rows = w.params.n_out;
    int64_t per = std::max<int64_t>(1, kChunkBytes / row_bytes(w)) / kChunkRowQuantum * kChunkRowQuantum;
    per = std::max(per, kChunkRowQuantum);
    for (int64_t r0 = 0; r0 < rows; r0 += per) chunks.push_back({static_cast<int32_t>(a), r0, std::min(per, rows - r0)});
  }
  const RowChunk* cs = chunks.data();
  const float* const* in = inputs.data();
  ex.pool->parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t b, int64_t e, int) {
    for (int64_t c = b; c < e; ++c) {
      const RowChunk& rc = cs[c];
      const LinearJob& j = jobs[static_cast<size_t>(rc.job)];
      const LinearWeight s = row_slice(*j.w, rc.r0, rc.rows);
      kernels::MatmulOptions o;
      o.round_bf16 = s.params.out_round == ref::OutRound::kBf16;
      o.isa = ex.isa;
      o.pool = nullptr;
      o.amx_min_tokens = ex.amx.min_tokens(kernels::WeightRole::kDense);  // linear_jobs: projections only
      float* y = j.y + rc.r0;  // n == 1: the slice's outputs are contiguous in y
      const float* x = in[rc.job];
      switch (s.format) {
        case WeightFormat::kFp8: kernels::fp8_gemm(s.fp8, x, 1, y, o); break;
        case WeightFormat::kFp4: kernels::fp4_gemm(s.fp4, x, 1, y, o); break;
        case WeightFormat::kBf16: kernels::bf16_gemm(s.bf16, x, 1, y, o); break;
        case WeightFormat::kF32: break;
      }
    }
  });
}

void grouped_linear(const Execution& ex, const LinearWeight& w, int64_t n_groups, const float* x, int64_t n,
                    float* out) {
  const int64_t k = w.params.n_in, rows = w.params.n_out / n_groups;
  if (n == 1 && w.format != WeightFormat::kF32) {
    // One token: group g's input and output are contiguous already; all groups in one dispatch.
    thread_local std::vector<LinearWeight> groups;  // views only: no allocation once sized
    thread_local std::vector<LinearJob> jobs;
    groups.resize(static_cast<size_t>(n_groups));
    jobs.resize(static_cast<size_t>(n_groups));
    for (int64_t g = 0; g < n_groups; ++g) {
      groups[static_cast<size_t>(g)] = row_slice(w, g * rows, rows);
      jobs[static_cast<size_t>(g)] = {&groups[static_cast<size_t>(g)], x + g * k, out + g * rows};
    }
    linear_jobs(ex, jobs, 1);
    return;
  }
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
