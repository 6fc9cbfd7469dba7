// kernels: the body of the compressor pooling kernel (compress_pool.h), written once with GCC vector
// types and compiled per ISA by compress_pool_{scalar,avx2,avx512}.cc with their instruction-set flags.
// Vector lanes are channels; each lane performs the reference's operations for its channel in order.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/compress_pool.h"

namespace dsv4::kernels::detail::pool_body {
// Internal linkage on purpose: each including file compiles its own copy with its own ISA flags (an
// inline function with external linkage would let the linker keep one copy for every ISA).
namespace {

using V16f = float __attribute__((vector_size(64)));
using V8f = float __attribute__((vector_size(32)));
using V8d = double __attribute__((vector_size(64)));
static_assert(kPoolLanes == 16);

// Channels [c0, c0 + n) with n ≤ 16 (a tail block pads with absent lanes that are never stored).
void pool_block(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t c0, int n,
                float* out, float* e) {
  V16f mx;
  for (int l = 0; l < kPoolLanes; ++l) mx[l] = -INFINITY;
  for (int64_t c = 0; c < n_cand; ++c) {
    V16f s = {};
    __builtin_memcpy(&s, score_rows[c] + c0, sizeof(float) * static_cast<size_t>(n));
    mx = s > mx ? s : mx;  // std::max(mx, s): s only when strictly greater
  }
  V8d sum_lo = {}, sum_hi = {};
  for (int64_t c = 0; c < n_cand; ++c) {
    V16f s = {};
    __builtin_memcpy(&s, score_rows[c] + c0, sizeof(float) * static_cast<size_t>(n));
    const V16f d = s - mx;
    V16f ev;
    for (int l = 0; l < kPoolLanes; ++l) ev[l] = std::exp(d[l]);  // −inf candidates give exactly 0
    __builtin_memcpy(e + c * kPoolLanes, &ev, sizeof(ev));
    V8f lo, hi;
    __builtin_memcpy(&lo, &ev, sizeof(lo));
    __builtin_memcpy(&hi, reinterpret_cast<const float*>(&ev) + 8, sizeof(hi));
    sum_lo += __builtin_convertvector(lo, V8d);
    sum_hi += __builtin_convertvector(hi, V8d);
  }
  V16f ssum;
  {
    const V8f lo = __builtin_convertvector(sum_lo, V8f), hi = __builtin_convertvector(sum_hi, V8f);
    __builtin_memcpy(&ssum, &lo, sizeof(lo));
    __builtin_memcpy(reinterpret_cast<float*>(&ssum) + 8, &hi, sizeof(hi));
  }
  V8d acc_lo = {}, acc_hi = {};
  for (int64_t c = 0; c < n_cand; ++c) {
    V16f kv = {}, ev;
    __builtin_memcpy(&kv, kv_rows[c] + c0, sizeof(float) * static_cast<size_t>(n));
    __builtin_memcpy(&ev, e + c * kPoolLanes, sizeof(ev));
    const V16f prod = kv * (ev / ssum);  // fp32 division and product, as the reference
    V8f lo, hi;
    __builtin_memcpy(&lo, &prod, sizeof(lo));
    __builtin_memcpy(&hi, reinterpret_cast<const float*>(&prod) + 8, sizeof(hi));
    acc_lo += __builtin_convertvector(lo, V8d);
    acc_hi += __builtin_convertvector(hi, V8d);
  }
  const V8f lo = __builtin_convertvector(acc_lo, V8f), hi = __builtin_convertvector(acc_hi, V8f);
  float res[kPoolLanes];
  __builtin_memcpy(res, &lo, sizeof(lo));
  __builtin_memcpy(res + 8, &hi, sizeof(hi));
  for (int l = 0; l < n; ++l) out[c0 + l] = res[l];
}

void pool(const float* const* kv_rows, const float* const* score_rows, int64_t n_cand, int64_t dc, float* out,
          float* e) {
  for (int64_t c0 = 0; c0 < dc; c0 += kPoolLanes)
    pool_block(kv_rows, score_rows, n_cand, c0, static_cast<int>(dc - c0 < kPoolLanes ? dc - c0 : kPoolLanes), out, e);
}

}  // namespace
}  // namespace dsv4::kernels::detail::pool_body
