// kernels (internal): the constants of glibc's expf (sysdeps/ieee754/flt-32/e_expf.c and e_exp2f_data.c, from
// Arm's optimized-routines), shared by the vector exps that reproduce it bit for bit (expf_avx512.inc,
// expf_avx2.inc). Data only: no ISA code, so any file may include it.
#pragma once

#include <cstdint>

namespace dsv4::kernels::detail::glibc_expf {

// tab[i] = bits(2^(i/32)) − (i << 47): adding k << 47 then gives 2^(k/32) for any |k| < 150·32.
alignas(64) inline constexpr uint64_t kTab[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
    0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
    0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
    0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
    0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
    0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
inline constexpr double kInvLn2N = 0x1.71547652b82fep+5;  // 32 / ln 2
inline constexpr double kShift = 0x1.8p+52;               // 1.5 · 2^52: adding it rounds to an integer
// 2^(r/32) ≈ (kC0·r + kC1)·r² + (kC2·r + 1).
inline constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13, kC2 = 0x1.62e42ff0c52d6p-6;
// The slow path: the top 12 bits of |x| (exponent and one mantissa bit) at or above 88.0f's.
inline constexpr uint32_t kSlowTop = 0x42b;

}  // namespace dsv4::kernels::detail::glibc_expf
