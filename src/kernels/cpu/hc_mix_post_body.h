// kernels: the body of the mHC post-mix (hc_mix_post.h), written once with GCC vector types and compiled
// per ISA by hc_mix_post_{scalar,avx2,avx512}.cc with -ffp-contract=off (a fused multiply-add would round
// once where the reference rounds twice).
#pragma once

#include <cstdint>

#include "core/formats.h"
#include "kernels/cpu/hc_mix_post.h"

namespace dsv4::kernels::detail::hc_post_body {
// Internal linkage on purpose: each including file compiles its own copy with its own ISA flags.
namespace {

using V16f = float __attribute__((vector_size(64)));
using V16u = uint32_t __attribute__((vector_size(64)));
using V16i = int32_t __attribute__((vector_size(64)));
constexpr int kLanes = 16;

// core/formats.h's float_to_bf16 then back to float, on 16 lanes: NaN → quiet NaN, else round to nearest
// even (overflowing to inf like the scalar). In place: a V16f argument or return value is an ABI change
// GCC warns about in the files without AVX-512.
void round_bf16_v(V16f* f) {
  V16u u;
  __builtin_memcpy(&u, f, sizeof(u));
  const V16i is_nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
  const V16u rounded = (u + (0x7FFFu + ((u >> 16) & 1u))) & 0xFFFF0000u;
  const V16u quiet = (u | 0x00400000u) & 0xFFFF0000u;
  const V16u r = is_nan ? quiet : rounded;
  __builtin_memcpy(f, &r, sizeof(r));
}

void post(int64_t hc, int64_t dim, int64_t d0, int64_t d1, const float* x, const float* residual, const float* post,
          const float* comb, float* out) {
  for (int64_t k = 0; k < hc; ++k) {
    const float pk = post[k];
    int64_t d = d0;
    for (; d + kLanes <= d1; d += kLanes) {
      V16f r, xv;
      __builtin_memcpy(&r, residual + d, sizeof(r));
      V16f acc = comb[k] * r;  // fp32 torch.sum over j, in order
      for (int64_t j = 1; j < hc; ++j) {
        __builtin_memcpy(&r, residual + j * dim + d, sizeof(r));
        acc = acc + comb[j * hc + k] * r;
      }
      __builtin_memcpy(&xv, x + d, sizeof(xv));
      V16f o = pk * xv + acc;
      round_bf16_v(&o);
      __builtin_memcpy(out + k * dim + d, &o, sizeof(o));
    }
    for (; d < d1; ++d) {  // the tail: the reference's scalar sequence
      float acc = comb[k] * residual[d];
      for (int64_t j = 1; j < hc; ++j) acc += comb[j * hc + k] * residual[j * dim + d];
      out[k * dim + d] = round_bf16(pk * x[d] + acc);
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels::detail::hc_post_body
