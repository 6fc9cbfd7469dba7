// unit: fp8_gemm / fp4_gemm against an independent oracle — the weights dequantized with core/formats.h
// (spec §3: w = value · 2^(e−127), the reference's fp32 dequantization) and dotted in double — over a
// grid of shapes with edges (tails below one vector, rows around the 128-row scale block and the 2-row
// tile, token counts around the 4-token tile), misaligned pointers, every ISA this CPU has, and 1 vs 3
// threads.
//
// Tolerance for the fp32 kernels: each product is exact (FMA), and every term passes through at most
// K + 8 fp32 additions (vector partial sums, the 16-lane reduction, the per-block scaled add), so
// |fast − exact| ≤ (K + 8)·u·Σ|x·w| with u = 2^-24 (Higham's recursive-summation bound); the oracle's own
// rounding to fp32 adds u·|exact|. A wrong nibble order or scale index is off by ~Σ|x·w|/√K, far outside.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles.h"
#include "kernels/cpu/row_pairs.h"
#include "kernel_isas.h"

namespace dsv4::kernels {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

struct Oracle {
  std::vector<double> exact;  // [m, n]
  std::vector<double> abs;    // Σ|x·w| per output
};

std::vector<Isa> fast_isas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx})
    if (isa_supported(isa)) out.push_back(isa);
  return out;
}

// Random activations: fake-quantized per 1×128 (what the model passes) when K allows, else raw floats.
std::vector<float> make_x(std::mt19937& rng, int64_t m, int64_t k, size_t offset) {
  std::vector<float> x(offset + static_cast<size_t>(m * k) + 1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> mag(-3.0f, 3.0f);
  for (int64_t t = 0; t < m; ++t) {
    const float row_scale = std::exp2(mag(rng));
    float* row = x.data() + offset + t * k;
    for (int64_t i = 0; i < k; ++i) row[i] = nd(rng) * row_scale;
    if (k % 128 == 0 && k > 0) fake_quant_fp8(std::span<float>(row, static_cast<size_t>(k)), 128);
  }
  return x;
}

struct Fp8Case {
  std::vector<uint8_t> codes, scales;  // with `offset` leading pad bytes
  Fp8Matrix w;
};

Fp8Case make_fp8(std::mt19937& rng, int64_t n, int64_t k, size_t offset) {
  Fp8Case c;
  const int64_t sr = (n + 127) / 128, sc = (k + 127) / 128;
  c.codes.resize(offset + static_cast<size_t>(n * k) + 1);
  c.scales.resize(offset + static_cast<size_t>(sr * sc) + 1);
  std::uniform_int_distribution<int> byte(0, 255), ex(127 - 12, 127 + 3);
  for (auto& b : c.codes) {
    do b = static_cast<uint8_t>(byte(rng));
    while ((b & 0x7F) == 0x7F);  // NaN codes are not weights
  }
  for (auto& s : c.scales) s = static_cast<uint8_t>(ex(rng));
  c.w = {c.codes.data() + offset, c.scales.data() + offset, n, k};
  return c;
}

// The scale extremes of the FP8 tile tests, on rows 0 and 128 of a 129-row matrix with K = k (two 128-row
// scale blocks): 1 gives row 0's last block 2^-127, 2 row 1's last block 2^127 on codes below 2 (bit 6
// cleared: the sums stay finite), 3 row 1 a NaN (code 255) scale; 0 leaves the draw.
void set_fp8_extreme(Fp8Case& c, int64_t k, int extreme) {
  const int64_t sc = (k + 127) / 128;
  if (extreme == 1) c.scales[static_cast<size_t>(sc - 1)] = 0;
  if (extreme == 2) {
    c.scales[static_cast<size_t>(sc + sc - 1)] = 254;
    for (int64_t i = (sc - 1) * 128; i < k; ++i) c.codes[static_cast<size_t>(128 * k + i)] &= 0xBF;
  }
  if (extreme == 3) c.scales[static_cast<size_t>(sc)] = 255;
}

struct Fp4Case {
  std::vector<uint8_t> packed, scales;
  Fp4Matrix w;
};

Fp4Case make_fp4(std::mt19937& rng, int64_t n, int64_t k, size_t offset) {
  Fp4Case c;
  c.packed.resize(offset + static_cast<size_t>(n * k / 2) + 1);
  c.scales.resize(offset + static_cast<size_t>(n * k / 32) + 1);
  std::uniform_int_distribution<int> byte(0, 255), ex(127 - 12, 127 + 3);
  for (auto& b : c.packed) b = static_cast<uint8_t>(byte(rng));
  for (auto& s : c.scales) s = static_cast<uint8_t>(ex(rng));
  c.w = {c.packed.data() + offset, c.scales.data() + offset, n, k};
  return c;
}

struct Bf16Case {
  std::vector<uint16_t> data;
  Bf16Matrix w;
};

Bf16Case make_bf16(std::mt19937& rng, int64_t n, int64_t k, size_t offset) {
  Bf16Case c;
  c.data.resize(offset + static_cast<size_t>(n * k) + 1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto& v : c.data) v = float_to_bf16(nd(rng));
  c.w = {c.data.data() + offset, n, k};
  return c;
}

float fp8_weight(const Fp8Matrix& w, int64_t n, int64_t k) {
  const int64_t sc = (w.n_cols + 127) / 128;
  return e4m3_to_float(w.codes[n * w.n_cols + k]) * std::ldexp(1.0f, w.scales[(n / 128) * sc + k / 128] - 127);
}

float fp4_weight(const Fp4Matrix& w, int64_t n, int64_t k) {
  const uint8_t byte = w.packed[n * (w.n_cols / 2) + k / 2];
  const uint8_t nib = (k % 2 == 0) ? (byte & 0xF) : (byte >> 4);
  return e2m1_to_float(nib) * std::ldexp(1.0f, w.scales[n * (w.n_cols / 32) + k / 32] - 127);
}

template <typename WeightFn>
Oracle oracle(int64_t n, int64_t k, int64_t m, const float* x, WeightFn weight) {
  Oracle o;
  o.exact.assign(static_cast<size_t>(m * n), 0.0);
  o.abs.assign(static_cast<size_t>(m * n), 0.0);
  std::vector<float> wrow(static_cast<size_t>(k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < k; ++i) wrow[static_cast<size_t>(i)] = weight(r, i);
    for (int64_t t = 0; t < m; ++t) {
      double s = 0, a = 0;
      for (int64_t i = 0; i < k; ++i) {
        const double p = static_cast<double>(x[t * k + i]) * wrow[static_cast<size_t>(i)];
        s += p;
        a += std::fabs(p);
      }
      o.exact[static_cast<size_t>(t * n + r)] = s;
      o.abs[static_cast<size_t>(t * n + r)] = a;
    }
  }
  return o;
}

void expect_within_bound(const Oracle& o, const std::vector<float>& got, int64_t k, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
    ASSERT_LE(std::fabs(got[i] - o.exact[i]), tol) << what << " output " << i << " got " << got[i] << " exact "
                                                   << o.exact[i];
  }
}

// One FP4 tile called directly: rows first_row .. first_row + rows − 1 of w against `tokens` prepared
// activation rows from x (stride ldx).
detail::Fp4Tile run_fp4_tile(detail::Fp4TileFn tile, const Fp4Matrix& w, int first_row, int rows, const float* x,
                             int64_t ldx, int tokens) {
  detail::Fp4Tile t;
  for (int r = 0; r < rows; ++r) {
    t.w[r] = w.packed + (first_row + r) * (w.n_cols / 2);
    t.s[r] = w.scales + (first_row + r) * (w.n_cols / 32);
  }
  t.n_rows = rows;
  t.x = x;
  t.ldx = ldx;
  t.n_tokens = tokens;
  t.k = w.n_cols;
  tile(t);
  return t;
}

// Runs one shape through every ISA, checking the scalar ISA bit-exactly and the fast ones within the bound,
// plus thread-count invariance, batch invariance and the bf16 output rounding.
template <typename Matrix, typename Gemm, typename WeightFn>
void check_shape(const Matrix& w, int64_t m, const float* x, Gemm gemm, WeightFn weight, ThreadPool& pool,
                 const std::string& what) {
  const int64_t n = w.n_rows, k = w.n_cols;
  const Oracle o = oracle(n, k, m, x, weight);
  std::vector<float> out(static_cast<size_t>(m * n), -1.0f);
  gemm(w, x, m, out.data(), MatmulOptions{false, Isa::kScalar, nullptr, 1});
  for (size_t i = 0; i < out.size(); ++i)
    ASSERT_EQ(out[i], static_cast<float>(o.exact[i])) << what << " scalar output " << i;

  for (Isa isa : fast_isas()) {
    const std::string tag = what + " isa=" + isa_name(isa);
    std::vector<float> serial(out.size(), -1.0f), threaded(out.size(), -2.0f), rounded(out.size(), -3.0f);
    gemm(w, x, m, serial.data(), MatmulOptions{false, isa, nullptr, 1});
    expect_within_bound(o, serial, k, tag);
    gemm(w, x, m, threaded.data(), MatmulOptions{false, isa, &pool, 1});
    ASSERT_EQ(0, std::memcmp(serial.data(), threaded.data(), serial.size() * sizeof(float))) << tag << " threads";
    gemm(w, x, m, rounded.data(), MatmulOptions{true, isa, &pool, 1});
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(rounded[i], round_bf16(serial[i])) << tag << " bf16 " << i;
    // Batch invariance: every token alone gives the same bits as inside the batch, whichever tile
    // width (1..8 tokens on the vector tiles, 1..16 token columns on AMX, which these calls put on AMX
    // at every token count: amx_min_tokens = 1) and tail computed it there.
    std::vector<float> single(static_cast<size_t>(n), -4.0f);
    for (int64_t t = 0; t < m; ++t) {
      gemm(w, x + t * k, 1, single.data(), MatmulOptions{false, isa, nullptr, 1});
      ASSERT_EQ(0, std::memcmp(single.data(), serial.data() + t * n, single.size() * sizeof(float)))
          << tag << " batch invariance, token " << t;
    }
  }
}

TEST(KernelQuantMatmul, Fp8GridOfShapesAgainstDequantizedDoubleOracle) {
  std::mt19937 rng(1234);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t n : {1, 2, 3, 17, 127, 128, 129, 257}) {
    for (int64_t k : {1, 7, 15, 16, 17, 128, 130, 256, 384, 656}) {
      for (int64_t m : {1, 2, 4, 5, 9, 16, 33}) {
        const size_t off = static_cast<size_t>(cases % 3);  // misalign codes by 0..2 bytes, x by 0..2 floats
        Fp8Case c = make_fp8(rng, n, k, off);
        const std::vector<float> xbuf = make_x(rng, m, k, off);
        check_shape(
            c.w, m, xbuf.data() + off, fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(c.w, r, i); }, pool,
            "fp8 n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        ++cases;
      }
    }
  }
}

TEST(KernelQuantMatmul, Fp4GridOfShapesAgainstDequantizedDoubleOracle) {
  std::mt19937 rng(99);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t n : {1, 2, 3, 17, 127, 128, 129, 257}) {
    for (int64_t k : {32, 64, 96, 128, 160, 256, 1024}) {
      for (int64_t m : {1, 2, 4, 5, 9, 16, 33}) {
        const size_t off = static_cast<size_t>(cases % 3);
        Fp4Case c = make_fp4(rng, n, k, off);
        const std::vector<float> xbuf = make_x(rng, m, k, off);
        check_shape(
            c.w, m, xbuf.data() + off, fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); }, pool,
            "fp4 n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        ++cases;
      }
    }
  }
}

// fp4_gemm's two-row tiles (row_pairs.h) read, above 8 tokens, rows q and q + h of each 32-row block, the
// last tile of an odd block one row, and at up to 8 tokens rows q and q + s of the range (decode order),
// the last tile of an odd range one row: every row count 1..70 (every block length and tail) at both,
// against the oracle on every ISA, serial and threaded (whose chunks start blocks at other rows).
TEST(KernelQuantMatmul, Fp4FarPairTilesAtEveryRowCount) {
  std::mt19937 rng(77);
  ThreadPool pool(3);
  for (int64_t n = 1; n <= 70; ++n) {
    for (int64_t m : {1, 3, 9}) {
      Fp4Case c = make_fp4(rng, n, 64, 0);
      const std::vector<float> x = make_x(rng, m, 64, 0);
      check_shape(
          c.w, m, x.data(), fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); }, pool,
          "fp4 far pairs n=" + std::to_string(n) + " m=" + std::to_string(m));
    }
  }
}

// Decode order (row_pairs.h) cuts a thread's rows into spans of 1 MiB per stream: matrices of one span and
// a half plus 3 rows (a whole span, then a short one whose length the tile rows do not divide), in every
// format at 1 and 8 tokens, against the oracle on every ISA, serial and threaded.
TEST(KernelQuantMatmul, DecodeOrderSpansAndTheirTails) {
  std::mt19937 rng(31);
  ThreadPool pool(3);
  for (int64_t m : {1, 8}) {
    const std::string tokens = " m=" + std::to_string(m);
    {
      const int64_t k = 16, n = detail::stream_span_rows(detail::kTileRows, k) * 3 / 2 + 3;
      Fp8Case c = make_fp8(rng, n, k, 0);
      const std::vector<float> x = make_x(rng, m, k, 0);
      check_shape(
          c.w, m, x.data(), fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(c.w, r, i); }, pool,
          "fp8 spans n=" + std::to_string(n) + tokens);
    }
    {
      const int64_t k = 32, n = detail::stream_span_rows(detail::kTileRows, k / 2) * 3 / 2 + 3;
      Fp4Case c = make_fp4(rng, n, k, 0);
      const std::vector<float> x = make_x(rng, m, k, 0);
      check_shape(
          c.w, m, x.data(), fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); }, pool,
          "fp4 spans n=" + std::to_string(n) + tokens);
    }
    {
      const int64_t k = 16, n = detail::stream_span_rows(detail::kBf16TileRows, 2 * k) * 3 / 2 + 3;
      Bf16Case c = make_bf16(rng, n, k, 0);
      const std::vector<float> x = make_x(rng, m, k, 0);
      check_shape(
          c.w, m, x.data(), bf16_gemm, [&](int64_t r, int64_t i) { return bf16_to_float(c.w.data[r * k + i]); },
          pool, "bf16 spans n=" + std::to_string(n) + tokens);
    }
  }
}

// Activations exact in bf16 at every K take the AVX-512 nibble-plane FP4 tile (the grid above
// gives it only K % 128 == 0, whose activations are fake-quantized): block counts that are not a
// multiple of its 4-block step, against the same oracle and the same invariances.
TEST(KernelQuantMatmul, Fp4Bf16ExactActivationsAtEveryBlockCount) {
  std::mt19937 rng(2024);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t n : {1, 2, 3, 17}) {
    for (int64_t k : {32, 64, 96, 160, 224, 288, 4128}) {
      for (int64_t m : {1, 2, 5}) {
        const size_t off = static_cast<size_t>(cases % 3);
        Fp4Case c = make_fp4(rng, n, k, off);
        std::vector<float> xbuf = make_x(rng, m, k, off);
        for (float& v : xbuf) v = round_bf16(v);
        check_shape(
            c.w, m, xbuf.data() + off, fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); }, pool,
            "fp4 bf16-exact n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        ++cases;
      }
    }
  }
}

TEST(KernelQuantMatmul, Bf16GridOfShapesAgainstDoubleOracle) {
  std::mt19937 rng(4321);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t n : {1, 3, 6, 17, 128, 129}) {
    for (int64_t k : {1, 7, 16, 17, 128, 130, 256, 656}) {
      for (int64_t m : {1, 4, 5, 16, 33}) {
        const size_t off = static_cast<size_t>(cases % 3);
        Bf16Case c = make_bf16(rng, n, k, off);
        const std::vector<float> xbuf = make_x(rng, m, k, off);
        check_shape(
            c.w, m, xbuf.data() + off, bf16_gemm,
            [&](int64_t r, int64_t i) { return bf16_to_float(c.w.data[r * k + i]); }, pool,
            "bf16 n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        ++cases;
      }
    }
  }
}

// Every batch size from 5 to 17: one 8-token tile plus each tail width, two 8-token tiles plus each tail,
// on row counts that leave a one-row tile and K with a partial block, for every weight format (FP4 with
// raw activations and with bf16-exact ones, which take the AVX-512 nibble-plane tile).
TEST(KernelQuantMatmul, BatchesOf5To17AgainstOracleAndSingleTokens) {
  std::mt19937 rng(58);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t m = 5; m <= 17; ++m) {
    for (int64_t n : {1, 3, 18}) {
      const size_t off = static_cast<size_t>(cases++ % 3);
      const std::string dims = " n=" + std::to_string(n) + " m=" + std::to_string(m);
      for (int64_t k : {17, 130}) {
        Fp8Case c8 = make_fp8(rng, n, k, off);
        const std::vector<float> x8 = make_x(rng, m, k, off);
        check_shape(
            c8.w, m, x8.data() + off, fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(c8.w, r, i); }, pool,
            "fp8" + dims + " k=" + std::to_string(k));
        Bf16Case cb = make_bf16(rng, n, k, off);
        check_shape(
            cb.w, m, x8.data() + off, bf16_gemm,
            [&](int64_t r, int64_t i) { return bf16_to_float(cb.w.data[r * k + i]); }, pool,
            "bf16" + dims + " k=" + std::to_string(k));
      }
      for (int64_t k : {96, 160}) {
        Fp4Case c4 = make_fp4(rng, n, k, off);
        std::vector<float> x4 = make_x(rng, m, k, off);
        check_shape(
            c4.w, m, x4.data() + off, fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c4.w, r, i); }, pool,
            "fp4" + dims + " k=" + std::to_string(k));
        for (float& v : x4) v = round_bf16(v);
        check_shape(
            c4.w, m, x4.data() + off, fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c4.w, r, i); }, pool,
            "fp4 bf16-exact" + dims + " k=" + std::to_string(k));
      }
    }
  }
}

// Activations exact in bf16 at K that are not multiples of 128 (the grid above fake-quantizes only
// K % 128 == 0) through the same FP8 tiles as any other: partial last blocks, and every batch
// 1..17 (each tile width 1..8 and tail) on row counts that leave a one-row tile.
TEST(KernelQuantMatmul, Fp8Bf16ExactActivationsAtEveryBatchAndPartialBlock) {
  std::mt19937 rng(808);
  ThreadPool pool(3);
  int cases = 0;
  for (int64_t m = 1; m <= 17; ++m) {
    for (int64_t n : {1, 3, 18}) {
      for (int64_t k : {17, 130, 300}) {
        const size_t off = static_cast<size_t>(cases++ % 3);
        Fp8Case c = make_fp8(rng, n, k, off);
        std::vector<float> x = make_x(rng, m, k, off);
        for (float& v : x) v = round_bf16(v);
        check_shape(
            c.w, m, x.data() + off, fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(c.w, r, i); }, pool,
            "fp8 bf16-exact n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
      }
    }
  }
}

#if defined(__x86_64__)
// The VDPBF16PS FP8 tile's documented order (quant_tiles_fp8_avx512bf16.cc), written from that comment in
// plain fp32 on natural-order activations and the core/formats.h weight values: per 128-K chunk and lane p,
// pairs (odd element first) of A then B vectors of each 64-code half, one fma with the chunk's scale into
// the lane's accumulator, then the 8/4/2/1 reduction tree. Terms past k are +0.
float fp8_bf16_emulate(const uint8_t* w, const uint8_t* s, const float* x, int64_t k) {
  float acc[16] = {};
  for (int64_t kb = 0; kb < k; kb += 128) {
    float part[16] = {};
    for (int h = 0; h < 2; ++h)
      for (int v = 0; v < 2; ++v)
        for (int p = 0; p < 16; ++p) {
          const int64_t e = kb + 64 * h + 16 * (p / 4) + 2 * (p % 4) + 8 * v;
          auto term = [&](int64_t i) { return i < k ? x[i] * e4m3_to_float(w[i]) : 0.0f; };  // exact
          part[p] = (part[p] + term(e + 1)) + term(e);
        }
    const uint8_t code = s[kb / 128];
    const float scale = code == 255 ? std::nanf("") : std::ldexp(1.0f, code - 127);
    for (int p = 0; p < 16; ++p) acc[p] = std::fma(part[p], scale, acc[p]);
  }
  float a8[8], a4[4], a2[2];
  for (int i = 0; i < 8; ++i) a8[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) a4[i] = a8[i] + a8[i + 4];
  for (int i = 0; i < 2; ++i) a2[i] = a4[i] + a4[i + 2];
  return a2[0] + a2[1];
}

// The kAvx512Bf16 FP8 tile called directly at every shape (1..2 rows × 1..8 tokens) on activations
// prepared by fp8_prepare_x_bf16pairs: every (row, token) sum bit-identical to the emulation above (so
// the same at every tile width: batch invariance), within the oracle's bound, at K around the 64-code
// halves and 128-K chunks (partial last chunks, one half only), every E4M3 code (the codes cycle through
// all 254 valid ones, both signs, subnormals), ±0 and 2^-100 activations, the scale codes 0 (2^-127) and
// 254 (2^127, on codes below 2), and a 255 (NaN) scale, which makes its row NaN and leaves the other alone.
TEST(KernelQuantMatmul, Fp8Bf16TileBitExactAgainstEmulation) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 + VBMI";
  std::mt19937 rng(913);
  int tested = 0;
  for (int64_t k : {1, 2, 63, 64, 65, 127, 128, 129, 192, 200, 256, 400, 1024, 4096}) {
    for (int extreme = 0; extreme < 4; ++extreme) {
      Fp8Case c = make_fp8(rng, 129, k, 0);  // rows 0 and 128: two 128-row scale blocks
      const int64_t sc = (k + 127) / 128;
      for (int64_t i = 0; i < k; ++i) {
        int code = static_cast<int>((i * 7 + extreme) % 254);
        code = code < 127 ? code : code + 1;  // skip 0x7F; 0xFF is 254 + 1 = 255 → never reached
        c.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(code);
      }
      set_fp8_extreme(c, k, extreme);
      std::vector<float> x = make_x(rng, 8, k, 0);
      for (float& v : x) v = round_bf16(v);
      if (extreme == 1 || extreme == 2)
        for (float& v : x) v = std::ldexp(v, extreme == 1 ? 40 : -40);
      x[0] = 0.0f;
      if (k > 3) {
        x[1] = -0.0f;
        x[2] = std::ldexp(1.0f, -100);  // the smallest magnitude the tile takes
        x[3] = -std::ldexp(1.5f, -100);
      }
      std::vector<float> xp(static_cast<size_t>(8 * detail::fp8_bf16pairs_stride(k)));
      ASSERT_TRUE(detail::fp8_prepare_x_bf16pairs(x.data(), 8, k, xp.data())) << "k=" << k;
      const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp8_weight(c.w, r * 128, i); });
      for (int rows = 2; rows >= 1; --rows) {
        for (int tokens = 8; tokens >= 1; --tokens) {
          detail::Fp8Tile t;
          for (int r = 0; r < 2; ++r) {
            t.w[r] = c.w.codes + r * 128 * k;
            t.s[r] = c.w.scales + r * sc;
          }
          t.n_rows = rows;
          t.x = xp.data();
          t.ldx = detail::fp8_bf16pairs_stride(k);
          t.n_tokens = tokens;
          t.k = k;
          detail::fp8_tile_avx512bf16(t);
          for (int r = 0; r < rows; ++r) {
            for (int j = 0; j < tokens; ++j) {
              const std::string at = "k=" + std::to_string(k) + " extreme " + std::to_string(extreme) + " tile " +
                                     std::to_string(rows) + "x" + std::to_string(tokens) + " row " + std::to_string(r) +
                                     " token " + std::to_string(j);
              const float want = fp8_bf16_emulate(c.w.codes + r * 128 * k, c.w.scales + r * sc, x.data() + j * k, k);
              if (extreme == 3 && r == 1) {
                ASSERT_TRUE(std::isnan(t.sums[r][j]) && std::isnan(want)) << at;
                continue;
              }
              ASSERT_EQ(0, std::memcmp(&want, &t.sums[r][j], sizeof(float))) << at << " got " << t.sums[r][j] << " want " << want;
              const size_t i = static_cast<size_t>(j * 2 + r);
              const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
              ASSERT_LE(std::fabs(t.sums[r][j] - o.exact[i]), tol) << at;
              ++tested;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(tested, 1000);
}

// fp8_gemm on kAvx512Bf16 takes the VDPBF16PS tile only for activations that are exact in bf16 with every
// nonzero |x| ≥ 2^-100; one value that is not (a 24-bit mantissa, or 2^-101, whose products could be
// denormal and flushed) moves the whole call to the AVX-512 fp32 tile — its bits exactly, within the bound
// — and counts one bf16 refusal. Accepted calls count none, equal the emulation, and differ from the
// fp32 tile in some bits (another summation order: proof the VDPBF16PS tile ran).
TEST(KernelQuantMatmul, Fp8Bf16GuardFallsBackToAvx512Bits) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16 + VBMI";
  std::mt19937 rng(17);
  ThreadPool pool(3);
  const int64_t n = 40, k = 384;
  for (int64_t m : {1, 3, 9}) {
    Fp8Case c = make_fp8(rng, n, k, 0);
    for (int bad = 0; bad < 4; ++bad) {
      std::vector<float> x = make_x(rng, m, k, 0);  // fake-quantized: exact in bf16, far above 2^-100
      const size_t at = static_cast<size_t>(m * k - 5);
      if (bad == 1) x[at] = 1.0f + std::ldexp(1.0f, -20);  // not a bf16 value
      if (bad == 2) x[at] = -std::ldexp(1.0f, -101);       // bf16, but below the guard
      if (bad == 3) x[at] = std::ldexp(1.0f, -100);        // exactly at it: taken
      const std::string what = "m=" + std::to_string(m) + " bad=" + std::to_string(bad);
      std::vector<float> got(static_cast<size_t>(m * n)), avx(got.size());
      const uint64_t before = bf16_refusals();
      fp8_gemm(c.w, x.data(), m, got.data(), MatmulOptions{false, Isa::kAvx512Bf16, &pool, 1});
      const uint64_t refused = bf16_refusals() - before;
      fp8_gemm(c.w, x.data(), m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
      expect_within_bound(oracle(n, k, m, x.data(), [&](int64_t r, int64_t i) { return fp8_weight(c.w, r, i); }), got,
                          k, what);
      if (bad == 1 || bad == 2) {
        EXPECT_EQ(refused, 1u) << what;
        EXPECT_EQ(got, avx) << what;
      } else {
        EXPECT_EQ(refused, 0u) << what;
        EXPECT_NE(got, avx) << what;
        for (int64_t t = 0; t < m; ++t)
          for (int64_t r = 0; r < n; ++r) {
            const float want = fp8_bf16_emulate(c.w.codes + r * k, c.w.scales + (r / 128) * 3, x.data() + t * k, k);
            ASSERT_EQ(0, std::memcmp(&want, &got[static_cast<size_t>(t * n + r)], sizeof(float))) << what;
          }
      }
    }
  }
}
#endif

// AMX runs FP8 and BF16 for K % 32 == 0 with bf16-exact activations, walking K in 128-wide chunks; a last
// chunk of 32, 64 or 96 runs fewer A/B steps (FP8 decodes it in masked 64-code halves). The grids above give
// AMX FP8 / BF16 only K % 128 == 0 (their other K are not multiples of 32, or raw floats that AMX refuses):
// here K = 32..288 (below one chunk, partial last chunks, and the page-by-page prefetch of rows under 4 KiB)
// and 1056, rows around the 16-row block and the 128-row scale block, tokens around the 16-token tile,
// against the oracle on every ISA with the thread, batch and bf16-output checks. The AMX outputs must
// differ from the AVX-512 ones in some bits (another summation order): proof that AMX ran, not the fallback.
TEST(KernelQuantMatmul, Fp8AndBf16PartialChunksOnAmxAgainstOracle) {
  std::mt19937 rng(4242);
  ThreadPool pool(3);
  int cases = 0, amx_differs = 0;
  for (int64_t k : {32, 64, 96, 160, 224, 288, 1056}) {
    for (int64_t n : {1, 15, 17, 129}) {
      for (int64_t m : {1, 2, 15, 17}) {
        const size_t off = static_cast<size_t>(cases++ % 3);
        const std::string dims = " n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m);
        std::vector<float> x = make_x(rng, m, k, off);
        for (float& v : x) v = round_bf16(v);
        const float* xp = x.data() + off;
        Fp8Case c8 = make_fp8(rng, n, k, off);
        check_shape(
            c8.w, m, xp, fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(c8.w, r, i); }, pool,
            "fp8 bf16-exact" + dims);
        Bf16Case cb = make_bf16(rng, n, k, off);
        check_shape(
            cb.w, m, xp, bf16_gemm, [&](int64_t r, int64_t i) { return bf16_to_float(cb.w.data[r * k + i]); }, pool,
            "bf16" + dims);
        if (!isa_supported(Isa::kAmx)) continue;
        std::vector<float> amx(static_cast<size_t>(m * n)), avx(amx.size());
        fp8_gemm(c8.w, xp, m, amx.data(), MatmulOptions{false, Isa::kAmx, nullptr, 1});
        fp8_gemm(c8.w, xp, m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
        amx_differs += amx != avx;
        bf16_gemm(cb.w, xp, m, amx.data(), MatmulOptions{false, Isa::kAmx, nullptr, 1});
        bf16_gemm(cb.w, xp, m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
        amx_differs += amx != avx;
      }
    }
  }
  if (isa_supported(Isa::kAmx)) {
    EXPECT_GT(amx_differs, cases / 4) << "AMX should have run (not the vector fallback)";
  }
}

// Every ISA's FP8 tile called directly at every shape (1..2 rows × 1..8 tokens): within the bound of the
// oracle, and each (row, token) sum bit-identical whatever the tile's shape (batch invariance at its
// source), including subnormal and negative codes, full and partial 128-K blocks, and the extreme scale
// codes 0 (2^-127) and 254 (2^127, where the fp32 tiles' w/256 decode must not overflow the scale); a 255
// (NaN) scale makes its row NaN and leaves the other row alone.
TEST(KernelQuantMatmul, Fp8TileEveryWidthAgainstOracle) {
  std::mt19937 rng(31);
  for (Isa isa : fast_isas()) {
    const detail::Fp8TileFn tile = detail::fp8_tile_for(resolve_isa(isa));
    for (int64_t k : {1, 32, 127, 128, 129, 400}) {
      for (int extreme = 0; extreme < 4; ++extreme) {
        // Two rows in two 128-row scale blocks (rows 0 and 128 of a 129-row matrix), so each has its own scales.
        Fp8Case c = make_fp8(rng, 129, k, 0);
        const int64_t sc = (k + 127) / 128;
        for (int64_t i = 0; i < 8 && i < k; ++i) c.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i | (i % 2) << 7);
        set_fp8_extreme(c, k, extreme);
        std::vector<float> x = make_x(rng, 8, k, 0);
        // Small activations keep 2^127-scaled sums finite; large ones make 2^-127-scaled products count.
        if (extreme == 1 || extreme == 2)
          for (float& v : x) v = std::ldexp(v, extreme == 1 ? 40 : -40);
        const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp8_weight(c.w, r * 128, i); });
        float ref[2][8];
        for (int rows = 2; rows >= 1; --rows) {
          for (int tokens = 8; tokens >= 1; --tokens) {
            detail::Fp8Tile t;
            for (int r = 0; r < 2; ++r) {
              t.w[r] = c.w.codes + r * 128 * k;
              t.s[r] = c.w.scales + r * sc;
            }
            t.n_rows = rows;
            t.x = x.data();
            t.ldx = k;
            t.n_tokens = tokens;
            t.k = k;
            tile(t);
            for (int r = 0; r < rows; ++r) {
              for (int j = 0; j < tokens; ++j) {
                const std::string at = std::string(isa_name(isa)) + " k=" + std::to_string(k) + " extreme " +
                                       std::to_string(extreme) + " tile " + std::to_string(rows) + "x" +
                                       std::to_string(tokens) + " row " + std::to_string(r) + " token " +
                                       std::to_string(j);
                if (rows == 2 && tokens == 8) {
                  ref[r][j] = t.sums[r][j];
                  if (extreme == 3 && r == 1) {
                    ASSERT_TRUE(std::isnan(t.sums[r][j])) << at;
                    continue;
                  }
                  const size_t i = static_cast<size_t>(j * 2 + r);
                  ASSERT_TRUE(std::isfinite(o.exact[i])) << at;
                  const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
                  ASSERT_LE(std::fabs(t.sums[r][j] - o.exact[i]), tol) << at;
                } else {
                  ASSERT_EQ(0, std::memcmp(&ref[r][j], &t.sums[r][j], sizeof(float))) << at;
                }
              }
            }
          }
        }
      }
    }
  }
}

#if defined(__x86_64__)
// The AVX2 FP8 tile on prepared activations (rebias decode, each token pre-scaled by 2^c and its sums by
// 2^(120 − c)) against the vcvtph2ps tile on the raw ones: where every partial sum stays in fp32's normal
// range both are one computation scaled by powers of two, so they must agree bit for bit — at every width
// (1..2 rows × 1..8 tokens), K with partial blocks and 16-column tails, every code, and activations from
// 2^-20 to 2^40 (c from 120 down to 86). At the scale extremes (2^-127 with large activations, 2^127 with
// small ones, NaN) the prepared tile is held to the oracle's bound and keeps NaN to its row.
TEST(KernelQuantMatmul, Fp8Avx2PreparedTileMatchesHalfTileAndOracle) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(4242);
  for (int64_t k : {1, 16, 17, 127, 128, 129, 400, 1024}) {
    for (int mag : {-20, 0, 8, 40}) {
      for (int extreme = 0; extreme < 4; ++extreme) {
        Fp8Case c = make_fp8(rng, 129, k, 0);
        const int64_t sc = (k + 127) / 128;
        for (int64_t i = 0; i < 16 && i < k; ++i) c.codes[static_cast<size_t>(i)] = static_cast<uint8_t>(i | (i % 2) << 7);
        set_fp8_extreme(c, k, extreme);
        std::vector<float> x = make_x(rng, 8, k, 0);
        const int shift = extreme == 1 ? 40 : extreme == 2 ? -40 : mag;
        for (float& v : x) v = std::ldexp(v, shift);
        std::vector<float> xp(static_cast<size_t>(8 * detail::fp8_avx2_stride(k)), -1.0f);
        detail::fp8_prepare_x_avx2(x.data(), 8, k, xp.data());
        const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp8_weight(c.w, r * 128, i); });
        for (int rows = 1; rows <= 2; ++rows) {
          for (int tokens = 1; tokens <= 8; ++tokens) {
            detail::Fp8Tile raw, prep;
            for (int r = 0; r < 2; ++r) {
              raw.w[r] = prep.w[r] = c.w.codes + r * 128 * k;
              raw.s[r] = prep.s[r] = c.w.scales + r * sc;
            }
            raw.n_rows = prep.n_rows = rows;
            raw.n_tokens = prep.n_tokens = tokens;
            raw.k = prep.k = k;
            raw.x = x.data();
            raw.ldx = k;
            prep.x = xp.data();
            prep.ldx = detail::fp8_avx2_stride(k);
            detail::fp8_tile_avx2(raw);
            detail::fp8_tile_avx2_prepared(prep);
            for (int r = 0; r < rows; ++r) {
              for (int j = 0; j < tokens; ++j) {
                const std::string at = "k=" + std::to_string(k) + " 2^" + std::to_string(shift) + " extreme " +
                                       std::to_string(extreme) + " tile " + std::to_string(rows) + "x" +
                                       std::to_string(tokens) + " row " + std::to_string(r) + " token " +
                                       std::to_string(j);
                if (extreme == 3 && r == 1) {
                  ASSERT_TRUE(std::isnan(prep.sums[r][j])) << at;
                  continue;
                }
                const size_t i = static_cast<size_t>(j * 2 + r);
                const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
                ASSERT_LE(std::fabs(prep.sums[r][j] - o.exact[i]), tol) << at;
                if (extreme == 0) {
                  ASSERT_EQ(0, std::memcmp(&raw.sums[r][j], &prep.sums[r][j], sizeof(float))) << at;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The fixed-point contract of Fp4XLayout::kAvx2Fixed (quant_tiles.h), in double: a block with a max
// magnitude in [2^e, 2^(e+1)) is fixed point iff it is finite, e ≥ −88 and every x / 2^(e−29) is an
// integer; with residue iff some such integer is not a multiple of 2^15. All zeros: kFixed.
detail::Fp4Avx2Mode expected_block_mode(const float* v, int64_t n) {
  double mx = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) return detail::Fp4Avx2Mode::kFloat;
    mx = std::max(mx, std::fabs(static_cast<double>(v[i])));
  }
  if (mx == 0.0) return detail::Fp4Avx2Mode::kFixed;
  const int e = std::ilogb(mx);
  if (e < -88) return detail::Fp4Avx2Mode::kFloat;
  bool residue = false;
  for (int64_t i = 0; i < n; ++i) {
    const double f = std::ldexp(static_cast<double>(v[i]), 29 - e);
    if (f != std::floor(f)) return detail::Fp4Avx2Mode::kFloat;
    residue = residue || std::fmod(f, 32768.0) != 0.0;
  }
  return residue ? detail::Fp4Avx2Mode::kFixedResidue : detail::Fp4Avx2Mode::kFixed;
}

// The AVX2 FP4 tile's activations per 64-element group (Fp4XLayout::kAvx2Fixed), group kinds mixed per
// token so that every tile has tokens of each path side by side: fake-quantized E4M3, one element 2^-17
// below its block's max (bits below y's 2^15 units: residue), all zeros, one element off the block's
// 2^-30 grid, a block below 2^-88, denormals, raw floats. Checked: each group's mode against the contract
// above (and every mode seen); every fixed group's x rebuilt exactly from y, r and unit at its layout
// position; the tile at every width (1..2 rows × 1..8 tokens) within the oracle's bound and bit-identical
// to one token at a time; and the paths' independence: poisoning what a group's path does not read (xf
// of fixed groups, y of float groups, r of kFixed ones) leaves every sum's bits unchanged.
TEST(KernelQuantMatmul, Fp4Avx2FixedPointTileEveryWidthAndMode) {
  if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "no AVX2";
  const detail::Fp4Kernel kern = detail::fp4_kernel_for(Isa::kAvx2, detail::XExact::kNone);
  ASSERT_EQ(kern.layout, detail::Fp4XLayout::kAvx2Fixed);
  std::mt19937 rng(4242);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  enum Kind { kQuant, kResidue, kZeros, kOffGrid, kTiny, kDenormal, kRaw, kKinds };
  int seen[3] = {};
  for (int64_t k : {32, 64, 96, 160, 544, 1056}) {
    const int64_t nb = k / 32, n_groups = (nb + 1) / 2;
    Fp4Case c = make_fp4(rng, 2, k, 0);
    std::vector<float> x(static_cast<size_t>(8 * k));
    for (int64_t t = 0; t < 8; ++t) {
      for (int64_t g = 0; g < n_groups; ++g) {
        const int kd = static_cast<int>((t + 3 * g) % kKinds);
        const int lg = static_cast<int>((t * 7 + g * 5) % 40) - 20;  // magnitude 2^lg
        float* grp = x.data() + t * k + 64 * g;
        const int64_t len = std::min<int64_t>(64, k - 64 * g);
        for (int64_t i = 0; i < len; ++i) {
          grp[i] = kd == kZeros ? 0.0f : std::ldexp(nd(rng), lg);
          if (kd == kTiny) grp[i] = std::ldexp(nd(rng), -95);
          if (kd == kDenormal) grp[i] = std::ldexp(nd(rng), -140);
        }
        if (kd == kQuant || kd == kResidue || kd == kOffGrid)
          fake_quant_fp8(std::span<float>(grp, static_cast<size_t>(len)), 32);
        // Block 0's max set to 2^(lg+3) (above every draw's E4M3 value), then element 1 at 1.5·2^-17 or
        // 1.5·2^-27 of it: 768 of the 2^-29 units (residue) or 0.75 of one (off the grid).
        if (kd == kResidue || kd == kOffGrid) {
          grp[0] = std::ldexp(1.0f, lg + 3);
          grp[1] = std::ldexp(1.5f, lg + 3 - (kd == kResidue ? 17 : 27));
        }
      }
    }
    const int64_t ldx = detail::fp4_x_stride(kern.layout, k);
    std::vector<float> xp(static_cast<size_t>(8 * ldx));
    detail::fp4_prepare_x(kern.layout, x.data(), 8, k, xp.data());
    for (int64_t t = 0; t < 8; ++t) {
      const detail::Fp4Avx2Row row = detail::fp4_avx2_row(xp.data() + t * ldx, k);
      for (int64_t g = 0; g < n_groups; ++g) {
        const float* grp = x.data() + t * k + 64 * g;
        const int64_t len = std::min<int64_t>(64, k - 64 * g);
        const detail::Fp4Avx2Mode want =
            std::max(expected_block_mode(grp, std::min<int64_t>(32, len)),
                     len > 32 ? expected_block_mode(grp + 32, len - 32) : detail::Fp4Avx2Mode::kFixed);
        const std::string at = "k=" + std::to_string(k) + " token " + std::to_string(t) + " group " + std::to_string(g);
        ASSERT_EQ(row.mode[g], want) << at;
        ++seen[static_cast<int>(row.mode[g])];
        if (row.mode[g] == detail::Fp4Avx2Mode::kFloat) continue;
        static constexpr int kOff[4] = {0, 2, 1, 3};
        for (int v = 0; v < 4; ++v)
          for (int lane = 0; lane < 2; ++lane)
            for (int i = 0; i < 8; ++i) {
              const int64_t e = 64 * g + 32 * lane + 4 * i + kOff[v], slot = 64 * g + 16 * v + 8 * lane + i;
              const double fixed = row.y[slot] * 32768.0 + (row.mode[g] == detail::Fp4Avx2Mode::kFixedResidue ? row.r[slot] : 0);
              const double want = e < k ? x[static_cast<size_t>(t * k + e)] : 0.0;
              ASSERT_EQ(fixed * row.unit[8 * g + 4 * lane] * 0x1p-6, want) << at << " element " << e;
            }
      }
    }
    const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); });
    auto run = [&](const std::vector<float>& prepared, int rows, int tokens) {
      return run_fp4_tile(kern.tile, c.w, 0, rows, prepared.data(), ldx, tokens);
    };
    // One token at a time (the single-token loop) is the reference for every other width.
    float ref[2][8];
    for (int64_t j = 0; j < 8; ++j) {
      std::vector<float> one(xp.begin() + j * ldx, xp.begin() + (j + 1) * ldx);
      const detail::Fp4Tile t = run(one, 2, 1);
      for (int r = 0; r < 2; ++r) {
        ref[r][j] = t.sums[r][0];
        const size_t i = static_cast<size_t>(j * 2 + r);
        // Denormal activations (float path): each fp32 step may also round on the 2^-149 grid.
        const double tol = (static_cast<double>(k) + 8) * (kU * o.abs[i] + 0x1p-149) + kU * std::fabs(o.exact[i]);
        ASSERT_LE(std::fabs(ref[r][j] - o.exact[i]), tol) << "k=" << k << " row " << r << " token " << j;
      }
    }
    std::vector<float> poisoned = xp;
    for (int64_t t = 0; t < 8; ++t) {
      const detail::Fp4Avx2Row row = detail::fp4_avx2_row(poisoned.data() + t * ldx, k);
      for (int64_t g = 0; g < n_groups; ++g) {
        if (row.mode[g] != detail::Fp4Avx2Mode::kFloat)
          std::fill(row.xf + 64 * g, row.xf + 64 * g + 64, std::numeric_limits<float>::quiet_NaN());
        if (row.mode[g] != detail::Fp4Avx2Mode::kFixedResidue) std::fill(row.r + 64 * g, row.r + 64 * g + 64, int16_t{0x7FFF});
        if (row.mode[g] == detail::Fp4Avx2Mode::kFloat) std::fill(row.y + 64 * g, row.y + 64 * g + 64, int16_t{-0x8000});
      }
    }
    for (const std::vector<float>* prepared : {&xp, &poisoned})
      for (int rows = 1; rows <= 2; ++rows)
        for (int tokens = 1; tokens <= 8; ++tokens) {
          const detail::Fp4Tile t = run(*prepared, rows, tokens);
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < tokens; ++j)
              ASSERT_EQ(0, std::memcmp(&ref[r][j], &t.sums[r][j], sizeof(float)))
                  << "k=" << k << (prepared == &xp ? "" : " poisoned") << " tile " << rows << "x" << tokens << " row "
                  << r << " token " << j;
        }
  }
  for (int mode = 0; mode < 3; ++mode) EXPECT_GT(seen[mode], 8) << "mode " << mode;

  // Residue bits counted exactly: x = 1 and i·2^-17 (i = 2..64: r ≠ 0 on most), weights at scale 1. Every
  // product and partial sum is a multiple of 2^-18 below 2^3, so any order is exact: the tile must give
  // the double dot's value, which dropping the r pass would miss by ≥ 2^-18 (a relative error far inside
  // the bound above).
  Fp4Case c = make_fp4(rng, 2, 64, 0);
  std::fill(c.scales.begin(), c.scales.end(), uint8_t{127});
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[static_cast<size_t>(i)] = i == 0 ? 1.0f : std::ldexp(static_cast<float>(i + 1), -17);
  const int64_t ldx = detail::fp4_x_stride(kern.layout, 64);
  std::vector<float> xp(static_cast<size_t>(ldx));
  detail::fp4_prepare_x(kern.layout, x.data(), 1, 64, xp.data());
  const detail::Fp4Avx2Row row = detail::fp4_avx2_row(xp.data(), 64);
  ASSERT_EQ(row.mode[0], detail::Fp4Avx2Mode::kFixedResidue);
  std::fill(row.xf, row.xf + 64, std::numeric_limits<float>::quiet_NaN());
  const detail::Fp4Tile t = run_fp4_tile(kern.tile, c.w, 0, 2, xp.data(), ldx, 1);
  for (int r = 0; r < 2; ++r) {
    double exact = 0.0;
    for (int i = 0; i < 64; ++i) exact += static_cast<double>(x[static_cast<size_t>(i)]) * fp4_weight(c.w, r, i);
    EXPECT_EQ(t.sums[r][0], exact) << "row " << r;
  }
}
#endif

// Every ISA's BF16 tile called directly at every shape (1..4 rows × 1..8 tokens, the rows at every position
// of the tile): within the oracle's bound, and each (row, token) sum bit-identical whatever the tile's
// shape and the row's place in it (batch invariance at its source), across full and masked K steps.
TEST(KernelQuantMatmul, Bf16TileEveryShapeAgainstOracle) {
  std::mt19937 rng(77);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    const detail::Bf16TileFn tile = detail::bf16_tile_for(resolve_isa(isa));
    for (int64_t k : {1, 15, 16, 17, 33, 256, 300}) {
      constexpr int kRows = detail::kBf16TileRows;
      Bf16Case c = make_bf16(rng, kRows, k, 0);
      const std::vector<float> x = make_x(rng, 8, k, 0);
      const Oracle o = oracle(kRows, k, 8, x.data(), [&](int64_t r, int64_t i) { return bf16_to_float(c.w.data[r * k + i]); });
      float ref[kRows][8];
      for (int rows = kRows; rows >= 1; --rows) {
        for (int first = 0; first + rows <= kRows; ++first) {  // the tile holds weight rows [first, first + rows)
          for (int tokens = 8; tokens >= 1; --tokens) {
            detail::Bf16Tile t;
            for (int r = 0; r < rows; ++r) t.w[r] = c.w.data + (first + r) * k;
            t.n_rows = rows;
            t.x = x.data();
            t.ldx = k;
            t.n_tokens = tokens;
            t.k = k;
            tile(t);
            for (int r = 0; r < rows; ++r) {
              for (int j = 0; j < tokens; ++j) {
                const int row = first + r;
                const std::string at = std::string(isa_name(isa)) + " k=" + std::to_string(k) + " tile " +
                                       std::to_string(rows) + "x" + std::to_string(tokens) + " row " + std::to_string(row) +
                                       " token " + std::to_string(j);
                if (rows == kRows && tokens == 8) {
                  ref[row][j] = t.sums[r][j];
                  const size_t i = static_cast<size_t>(j * kRows + row);
                  const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
                  ASSERT_LE(std::fabs(t.sums[r][j] - o.exact[i]), tol) << at;
                } else {
                  ASSERT_EQ(0, std::memcmp(&ref[row][j], &t.sums[r][j], sizeof(float))) << at;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The AVX-512 nibble-plane FP4 tile called directly at every shape (1..2 rows × 1..8 tokens, including
// the two-pass 5..8 tokens): within the oracle's bound, each (row, token) sum bit-identical whatever the
// tile's shape, at K with partial 128-chunks and past the 16-block scale groups, with the extreme scale
// codes 0 (2^-127) and 254; a 255 (NaN) scale makes its row NaN and leaves the other row alone.
TEST(KernelQuantMatmul, Fp4PlanesTileEveryWidthAgainstOracle) {
  const detail::Fp4Kernel kern = detail::fp4_kernel_for(resolve_isa(Isa::kAvx512), detail::XExact::kBf16);
  if (kern.layout != detail::Fp4XLayout::kNibblePlanes) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(37);
  for (int64_t k : {32, 96, 128, 160, 512, 544, 1056}) {
    for (int extreme = 0; extreme < 3; ++extreme) {
      Fp4Case c = make_fp4(rng, 2, k, 0);
      const int64_t nb = k / 32;
      if (extreme == 1) c.scales[static_cast<size_t>(nb - 1)] = 0;         // row 0's last block: 2^-127
      if (extreme == 2) c.scales[static_cast<size_t>(nb + nb / 2)] = 255;  // row 1: NaN
      std::vector<float> x = make_x(rng, 8, k, 0);
      // Large activations on the 2^-127 block make its products count (their unscaled sum stays finite).
      if (extreme == 1)
        for (int64_t t = 0; t < 8; ++t)
          for (int64_t i = k - 32; i < k; ++i) x[static_cast<size_t>(t * k + i)] = std::ldexp(1.5f, 112 + static_cast<int>(i % 7));
      for (float& v : x) v = round_bf16(v);
      const int64_t ldx = detail::fp4_x_stride(kern.layout, k);
      std::vector<float> xp(static_cast<size_t>(8 * ldx));
      detail::fp4_prepare_x(kern.layout, x.data(), 8, k, xp.data());
      const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); });
      float ref[2][8];
      for (int rows = 2; rows >= 1; --rows) {
        for (int tokens = 8; tokens >= 1; --tokens) {
          const detail::Fp4Tile t = run_fp4_tile(kern.tile, c.w, 0, rows, xp.data(), ldx, tokens);
          for (int r = 0; r < rows; ++r) {
            for (int j = 0; j < tokens; ++j) {
              const std::string at = "k=" + std::to_string(k) + " extreme " + std::to_string(extreme) + " tile " +
                                     std::to_string(rows) + "x" + std::to_string(tokens) + " row " + std::to_string(r) +
                                     " token " + std::to_string(j);
              if (rows == 2 && tokens == 8) {
                ref[r][j] = t.sums[r][j];
                const size_t i = static_cast<size_t>(j * 2 + r);
                if (extreme == 2 && r == 1) {
                  ASSERT_TRUE(std::isnan(t.sums[r][j])) << at;
                } else {
                  const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
                  ASSERT_LE(std::fabs(t.sums[r][j] - o.exact[i]), tol) << at << " got " << t.sums[r][j];
                }
              } else {
                ASSERT_EQ(0, std::memcmp(&ref[r][j], &t.sums[r][j], sizeof(float))) << at;
              }
            }
          }
        }
      }
    }
  }
}

// The VDPBF16PS tile's documented order (quant_tiles_fp4_avx512bf16.cc), in plain fp32 scalar code: per
// 128-element chunk and lane i, s = +0, then for q = 0..3 s = (s + p[e + 4]) + p[e] (e = 128c + 8i + q,
// p = x·E2M1 value, exact in fp32, +0 past k), then acc[i] = fma(s, scale of block 4c + i/4, acc[i]) (a
// block past k reads scale code 0), and the 16 lanes summed i + 8 onto i, then + 4, + 2, + 1.
float emulate_fp4_bf16_dot(const uint8_t* w, const uint8_t* s, const float* x, int64_t k) {
  float acc[16] = {};
  for (int64_t c = 0; c < k; c += 128) {
    for (int i = 0; i < 16; ++i) {
      auto prod = [&](int64_t e) {
        if (e >= k) return 0.0f;
        const uint8_t byte = w[e / 2];
        return x[e] * e2m1_to_float(static_cast<uint8_t>(e % 2 == 0 ? byte & 0xF : byte >> 4));
      };
      float sum = 0.0f;
      for (int q = 0; q < 4; ++q) {
        const int64_t e = c + 8 * i + q;
        sum = (sum + prod(e + 4)) + prod(e);
      }
      const int64_t block = (c + 8 * i) / 32;
      acc[i] = std::fma(sum, detail::kE8m0ToFloat[block < k / 32 ? s[block] : 0], acc[i]);
    }
  }
  float a[8], b[4];
  for (int i = 0; i < 8; ++i) a[i] = acc[i] + acc[i + 8];
  for (int i = 0; i < 4; ++i) b[i] = a[i] + a[i + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}

bool same_float(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

// The VDPBF16PS FP4 tile (Isa::kAvx512Bf16) called directly at every shape (1..2 rows × 1..8 tokens), bit
// for bit against the scalar emulation of its order, and within the oracle's bound: K with partial
// 128-chunks and past the 16-block scale groups, every E2M1 code, scale codes over the whole range (0 =
// 2^-127 and 254 = 2^127 with products that overflow, 255 = NaN on one block), activations at many
// magnitudes down to 2^-100, weights and prepared activations misaligned.
TEST(KernelQuantMatmul, Fp4Bf16DotTileMatchesEmulationBitForBit) {
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  const detail::Fp4Kernel kern = detail::fp4_kernel_for(Isa::kAvx512Bf16, detail::XExact::kBf16Dot);
  ASSERT_EQ(kern.layout, detail::Fp4XLayout::kBf16Pairs);
  std::mt19937 rng(4242);
  int cases = 0;
  for (int64_t k : {32, 64, 96, 128, 160, 512, 544, 1056, 2048, 4096}) {
    for (int variant = 0; variant < 3; ++variant, ++cases) {
      const size_t woff = static_cast<size_t>(cases % 3), xoff = static_cast<size_t>(cases % 5);
      Fp4Case c = make_fp4(rng, 2, k, woff);
      const int64_t nb = k / 32;
      std::uniform_int_distribution<int> any_scale(0, 254);
      if (variant == 1)
        for (int64_t b = 0; b < 2 * nb; ++b) c.scales[woff + static_cast<size_t>(b)] = static_cast<uint8_t>(any_scale(rng));
      if (variant == 2) c.scales[woff + static_cast<size_t>(nb + nb / 2)] = 255;  // row 1: NaN
      std::vector<float> x = make_x(rng, 8, k, 0);
      if (variant == 2)  // activations from 2^-100 up: every nonzero product stays a normal fp32
        for (int64_t t = 0; t < 8; ++t)
          for (int64_t i = 0; i < k; i += 3) x[static_cast<size_t>(t * k + i)] = std::ldexp(i % 2 ? -1.0f : 1.5f, -100 + static_cast<int>(i % 97));
      for (float& v : x) v = round_bf16(v);
      ASSERT_EQ(detail::x_exactness(x.data(), 8 * k), detail::XExact::kBf16Dot);
      const int64_t ldx = detail::fp4_x_stride(kern.layout, k);
      std::vector<float> xbuf(xoff + static_cast<size_t>(8 * ldx));
      float* xp = xbuf.data() + xoff;
      detail::fp4_prepare_x(kern.layout, x.data(), 8, k, xp);
      const Oracle o = oracle(2, k, 8, x.data(), [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); });
      for (int rows = 1; rows <= 2; ++rows) {
        for (int tokens = 1; tokens <= 8; ++tokens) {
          for (int j0 = 0; j0 + tokens <= 8; j0 += tokens) {
            // One row: row 1 (the one with the NaN block).
            const detail::Fp4Tile t = run_fp4_tile(kern.tile, c.w, 2 - rows, rows, xp + j0 * ldx, ldx, tokens);
            for (int r = 0; r < rows; ++r) {
              const int row = r + 2 - rows;
              for (int j = 0; j < tokens; ++j) {
                const int tok = j0 + j;
                const std::string at = "k=" + std::to_string(k) + " variant " + std::to_string(variant) + " tile " +
                                       std::to_string(rows) + "x" + std::to_string(tokens) + " row " +
                                       std::to_string(row) + " token " + std::to_string(tok);
                const float want = emulate_fp4_bf16_dot(t.w[r], t.s[r], x.data() + tok * k, k);
                ASSERT_TRUE(same_float(t.sums[r][j], want)) << at << " got " << t.sums[r][j] << " want " << want;
                const size_t i = static_cast<size_t>(tok * 2 + row);
                if (variant == 0) {
                  const double tol = (static_cast<double>(k) + 8) * kU * o.abs[i] + kU * std::fabs(o.exact[i]);
                  ASSERT_LE(std::fabs(t.sums[r][j] - o.exact[i]), tol) << at << " got " << t.sums[r][j];
                }
              }
            }
          }
        }
      }
    }
  }
}

// The guard in front of the VDPBF16PS tile: x_exactness's classes at their edges, and fp4_gemm on
// Isa::kAvx512Bf16 with activations it must refuse — a nonzero below 2^-100 (which VDPBF16PS would
// flush: bf16 denormals read as zero, tiny products' sums flushed) and values not exact in bf16 — takes
// the AVX-512 tiles (the same bits as Isa::kAvx512), counts one bf16 refusal per call and stays within
// the oracle's bound; ordinary activations take the tile (its emulated bits) and count nothing.
TEST(KernelQuantMatmul, Fp4Bf16DotGuardFallsBackForTinyOrInexactActivations) {
  const auto cls = [](float v) { return detail::x_exactness(&v, 1); };
  EXPECT_EQ(cls(0.0f), detail::XExact::kBf16Dot);
  EXPECT_EQ(cls(-0.0f), detail::XExact::kBf16Dot);
  EXPECT_EQ(cls(std::ldexp(1.0f, -100)), detail::XExact::kBf16Dot);
  EXPECT_EQ(cls(-std::ldexp(1.9921875f, -101)), detail::XExact::kBf16);  // largest bf16 below 2^-100
  EXPECT_EQ(cls(std::ldexp(1.0f, -130)), detail::XExact::kBf16);         // an fp32 (and bf16) denormal
  EXPECT_EQ(cls(std::numeric_limits<float>::infinity()), detail::XExact::kBf16Dot);
  EXPECT_EQ(cls(1.0f + std::ldexp(1.0f, -10)), detail::XExact::kNone);
  EXPECT_EQ(cls(std::ldexp(1.0f, -149)), detail::XExact::kNone);  // low bits set
  if (!isa_supported(Isa::kAvx512Bf16)) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(515);
  constexpr int64_t kN = 34, kK = 4128, kM = 3;
  Fp4Case c = make_fp4(rng, kN, kK, 0);
  const auto weight = [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); };
  for (int kind = 0; kind < 4; ++kind) {
    std::vector<float> x = make_x(rng, kM, kK, 0);
    for (float& v : x) v = round_bf16(v);
    // 0: ordinary; 1: tiny values of one token (2^-101 .. 2^-126, normal in fp32 and bf16); 2: bf16
    // denormals; 3: one value not exact in bf16.
    if (kind == 1)
      for (int64_t i = 0; i < kK; i += 5) x[static_cast<size_t>(kK + i)] = std::ldexp(i % 2 ? 1.5f : -1.0f, -101 - static_cast<int>(i % 26));
    if (kind == 2)
      for (int64_t i = 0; i < kK; i += 7) x[static_cast<size_t>(2 * kK + i)] = std::ldexp(1.0f, -127 - static_cast<int>(i % 6));
    if (kind == 3) x[static_cast<size_t>(kK + 77)] = 1.0f + std::ldexp(1.0f, -12);
    const std::string tag = "kind " + std::to_string(kind);
    std::vector<float> got(static_cast<size_t>(kM * kN)), avx512(got.size());
    const uint64_t before = bf16_refusals();
    fp4_gemm(c.w, x.data(), kM, got.data(), MatmulOptions{false, Isa::kAvx512Bf16, nullptr, 1});
    EXPECT_EQ(bf16_refusals() - before, kind == 0 ? 0u : 1u) << tag;
    fp4_gemm(c.w, x.data(), kM, avx512.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
    const Oracle o = oracle(kN, kK, kM, x.data(), weight);
    expect_within_bound(o, got, kK, tag);
    for (int64_t t = 0; t < kM; ++t)
      for (int64_t r = 0; r < kN; ++r) {
        const size_t i = static_cast<size_t>(t * kN + r);
        if (kind == 0) {
          const float want = emulate_fp4_bf16_dot(c.w.packed + r * (kK / 2), c.w.scales + r * (kK / 32), x.data() + t * kK, kK);
          ASSERT_TRUE(same_float(got[i], want)) << tag << " row " << r << " token " << t;
        } else {
          ASSERT_TRUE(same_float(got[i], avx512[i])) << tag << " row " << r << " token " << t << " (fallback)";
        }
      }
  }
}

TEST(KernelQuantMatmul, RealExpertShapeFp4AndAttentionShapeFp8) {
  std::mt19937 rng(7);
  ThreadPool pool(2);
  Fp4Case e = make_fp4(rng, 2048, 4096, 0);  // routed expert w1/w3
  const std::vector<float> x4 = make_x(rng, 1, 4096, 0);
  check_shape(e.w, 1, x4.data(), fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(e.w, r, i); }, pool,
              "fp4 expert w1");
  Fp8Case a = make_fp8(rng, 1024, 4096, 0);  // wq_a
  check_shape(a.w, 1, x4.data(), fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(a.w, r, i); }, pool,
              "fp8 wq_a");
  // Rows shorter than a page (wq_b's 1 KiB, the shared w2's 2 KiB): AMX prefetches the next block page by
  // page there; 1 and 3 tokens, several blocks per thread.
  for (int64_t k : {1024, 2048}) {
    Fp8Case b = make_fp8(rng, 160, k, 0);
    const std::vector<float> xb = make_x(rng, 3, k, 0);
    for (int64_t m : {1, 3})
      check_shape(b.w, m, xb.data(), fp8_gemm, [&](int64_t r, int64_t i) { return fp8_weight(b.w, r, i); }, pool,
                  "fp8 short rows k=" + std::to_string(k) + " m=" + std::to_string(m));
  }
}

// Every valid E4M3 code and every E2M1 nibble (in both nibble positions, at every lane of a vector),
// decoded through the kernels with one-hot activations, equals the core/formats.h value exactly.
TEST(KernelQuantMatmul, DecodesEveryCodeExactly) {
  for (Isa isa : fast_isas()) {
    for (int code = 0; code < 256; ++code) {
      if ((code & 0x7F) == 0x7F) continue;  // NaN
      for (int64_t k : {1, 16, 23, 32, 160}) {  // 32, 160: the AMX path (k % 32 == 0), a tail chunk
        std::vector<uint8_t> codes(static_cast<size_t>(k), static_cast<uint8_t>(code));
        const std::vector<uint8_t> scale(static_cast<size_t>((k + 127) / 128), 127 + 3);
        for (int64_t hot = 0; hot < k; ++hot) {
          std::vector<float> x(static_cast<size_t>(k), 0.0f);
          x[static_cast<size_t>(hot)] = 1.0f;
          float out = -1.0f;
          fp8_gemm(Fp8Matrix{codes.data(), scale.data(), 1, k}, x.data(), 1, &out, MatmulOptions{false, isa, nullptr, 1});
          ASSERT_EQ(out, e4m3_to_float(static_cast<uint8_t>(code)) * 8.0f) << isa_name(isa) << " code " << code;
        }
      }
    }
    for (int nib = 0; nib < 16; ++nib) {
      std::vector<uint8_t> packed(32, static_cast<uint8_t>(nib * 17));  // both nibbles = nib
      const uint8_t scales[2] = {127 - 1, 127 + 2};
      for (int64_t hot = 0; hot < 64; ++hot) {
        std::vector<float> x(64, 0.0f);
        x[static_cast<size_t>(hot)] = 1.0f;
        float out = -1.0f;
        fp4_gemm(Fp4Matrix{packed.data(), scales, 1, 64}, x.data(), 1, &out, MatmulOptions{false, isa, nullptr, 1});
        const float want = e2m1_to_float(static_cast<uint8_t>(nib)) * (hot < 32 ? 0.5f : 4.0f);
        ASSERT_EQ(out, want) << isa_name(isa) << " nibble " << nib << " at " << hot;
      }
    }
  }
}

// Every E8M0 scale code 0..254 (255 is NaN) times a spread of weight codes, through every ISA with a
// one-hot activation: the output is the spec's value · 2^(e−127) in fp32 exactly — subnormal products
// (2^-9 · 2^-127) kept, products past FLT_MAX infinite, as the reference's fp32 dequantization gives. One
// 16-row block (FP8's scale is per 128 rows, so all rows share it; FP4's per row and 32 K), K 128 (the
// AMX path with amx_min_tokens 1, a full chunk), the hot column inside the second 32-K block.
TEST(KernelQuantMatmul, DecodesEveryScaleCodeExactly) {
  constexpr int64_t kN = 16, kK = 128, kHot = 37;
  const uint8_t fp8_codes[kN] = {0x01, 0x07, 0x08, 0x38, 0x3F, 0x7E, 0x81, 0xB8, 0xFE, 0x00, 0x80, 0x44, 0x5A, 0x22, 0x6F, 0x30};
  std::vector<float> x(static_cast<size_t>(kK), 0.0f);
  x[kHot] = 1.0f;
  for (Isa isa : isas()) {
    for (int e = 0; e <= 254; ++e) {
      const float scale = std::ldexp(1.0f, e - 127);
      std::vector<uint8_t> codes(static_cast<size_t>(kN * kK), 0);
      for (int64_t r = 0; r < kN; ++r) codes[static_cast<size_t>(r * kK + kHot)] = fp8_codes[r];
      const uint8_t s8 = static_cast<uint8_t>(e);
      std::vector<float> out(kN, -1.0f);
      fp8_gemm(Fp8Matrix{codes.data(), &s8, kN, kK}, x.data(), 1, out.data(), MatmulOptions{false, isa, nullptr, 1});
      for (int64_t r = 0; r < kN; ++r)
        ASSERT_EQ(out[static_cast<size_t>(r)], e4m3_to_float(fp8_codes[r]) * scale)
            << isa_name(isa) << " fp8 scale code " << e << " weight code " << static_cast<int>(fp8_codes[r]);
      // FP4: row r holds nibble r at the hot column (odd: its byte's high nibble; the low one zero, since
      // 0 · an infinite weight would be NaN), every 32-K block scale e.
      std::vector<uint8_t> packed(static_cast<size_t>(kN * kK / 2), 0), scales(static_cast<size_t>(kN * kK / 32), s8);
      for (int64_t r = 0; r < kN; ++r) packed[static_cast<size_t>(r * kK / 2 + kHot / 2)] = static_cast<uint8_t>(r << 4);
      fp4_gemm(Fp4Matrix{packed.data(), scales.data(), kN, kK}, x.data(), 1, out.data(), MatmulOptions{false, isa, nullptr, 1});
      for (int64_t r = 0; r < kN; ++r)
        ASSERT_EQ(out[static_cast<size_t>(r)], e2m1_to_float(static_cast<uint8_t>(r)) * scale)
            << isa_name(isa) << " fp4 scale code " << e << " nibble " << r;
    }
  }
}

// AMX folds the FP4 scale into the decoded bf16 exponent, which is exact only for E8M0 codes in [2, 252];
// a 16-row block holding any other scale takes an exact fp32 loop. Rows 16..31 carry scales at and past
// both edges, the other blocks ordinary ones; activations are scaled by a power of two that keeps every
// product a normal float. Against the oracle, with the thread- and batch-invariance checks.
TEST(KernelQuantMatmul, AmxFp4ScalesAtTheExponentExtremes) {
  std::mt19937 rng(31);
  ThreadPool pool(3);
  struct Edge {
    std::vector<uint8_t> scales;
    bool small_codes;  // |value| ≤ 1.5, so that 2^126 scales stay finite
    int x_log2;
  };
  const Edge edges[] = {{{0, 1}, false, 100}, {{2, 3}, false, 100}, {{251, 252}, false, -100},
                        {{253}, true, -100},  {{1, 2, 127}, false, 100}};
  for (const Edge& edge : edges) {
    for (int64_t k : {128, 160}) {
      for (int64_t m : {1, 3, 17}) {
        Fp4Case c = make_fp4(rng, 33, k, 0);
        std::uniform_int_distribution<size_t> pick(0, edge.scales.size() - 1);
        for (int64_t r = 16; r < 32; ++r)
          for (int64_t b = 0; b < k / 32; ++b) c.scales[static_cast<size_t>(r * (k / 32) + b)] = edge.scales[pick(rng)];
        if (edge.small_codes)
          for (auto& byte : c.packed) byte &= 0xBB;  // each nibble's bit 2 cleared: codes 0..3, 8..11
        std::vector<float> xbuf = make_x(rng, m, k, 0);
        for (float& v : xbuf) v = std::ldexp(v, edge.x_log2);
        check_shape(
            c.w, m, xbuf.data(), fp4_gemm, [&](int64_t r, int64_t i) { return fp4_weight(c.w, r, i); }, pool,
            "fp4 scale " + std::to_string(edge.scales[0]) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
      }
    }
  }
}

// The AMX path takes only activations bf16 holds exactly; others fall back to the AVX-512 tiles, whose
// results are batch-invariant — so a raw-float batch of 16 matches its tokens run one at a time.
TEST(KernelQuantMatmul, AmxFallsBackForActivationsNotExactInBf16) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "no AMX";
  std::mt19937 rng(5);
  Fp4Case c = make_fp4(rng, 64, 256, 0);
  std::vector<float> x(16 * 256);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);  // 24-bit mantissas: not bf16
  std::vector<float> batch(16 * 64), single(64);
  fp4_gemm(c.w, x.data(), 16, batch.data(), MatmulOptions{false, Isa::kAmx, nullptr, 1});
  for (int64_t t = 0; t < 16; ++t) {
    fp4_gemm(c.w, x.data() + t * 256, 1, single.data(), MatmulOptions{false, Isa::kAmx, nullptr, 1});
    ASSERT_EQ(0, std::memcmp(single.data(), batch.data() + t * 64, sizeof(float) * 64)) << t;
  }
}

// The refusal for every weight format (one raw float among bf16-exact ones is enough): the call takes the
// AVX-512 tiles — their bits exactly, at 1 and 17 tokens — and stays within the oracle's bound. (The test
// above compares AMX with AMX, so it would pass if AMX ran on the truncated activations.)
TEST(KernelQuantMatmul, AmxFallsBackToAvx512BitsForActivationsNotExactInBf16) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "no AMX";
  std::mt19937 rng(6);
  ThreadPool pool(3);
  for (int64_t m : {1, 17}) {
    const int64_t n = 33, k = 256;
    std::vector<float> x = make_x(rng, m, k, 0);  // fake-quantized: exact in bf16
    x[static_cast<size_t>(m * k - 3)] = 1.0f + std::ldexp(1.0f, -20);  // not a bf16 value
    Fp8Case c8 = make_fp8(rng, n, k, 0);
    Bf16Case cb = make_bf16(rng, n, k, 0);
    std::vector<float> amx(static_cast<size_t>(m * n)), avx(amx.size());
    fp8_gemm(c8.w, x.data(), m, amx.data(), MatmulOptions{false, Isa::kAmx, &pool, 1});
    fp8_gemm(c8.w, x.data(), m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
    EXPECT_EQ(amx, avx) << "fp8 m=" << m;
    expect_within_bound(oracle(n, k, m, x.data(), [&](int64_t r, int64_t i) { return fp8_weight(c8.w, r, i); }), amx, k,
                        "fp8 fallback m=" + std::to_string(m));
    bf16_gemm(cb.w, x.data(), m, amx.data(), MatmulOptions{false, Isa::kAmx, &pool, 1});
    bf16_gemm(cb.w, x.data(), m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
    EXPECT_EQ(amx, avx) << "bf16 m=" << m;
    expect_within_bound(oracle(n, k, m, x.data(), [&](int64_t r, int64_t i) { return bf16_to_float(cb.w.data[r * k + i]); }),
                        amx, k, "bf16 fallback m=" + std::to_string(m));
    Fp4Case c4 = make_fp4(rng, n, k, 0);
    fp4_gemm(c4.w, x.data(), m, amx.data(), MatmulOptions{false, Isa::kAmx, &pool, 1});
    fp4_gemm(c4.w, x.data(), m, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
    EXPECT_EQ(amx, avx) << "fp4 m=" << m;
    expect_within_bound(oracle(n, k, m, x.data(), [&](int64_t r, int64_t i) { return fp4_weight(c4.w, r, i); }), amx, k,
                        "fp4 fallback m=" + std::to_string(m));
  }
}

// The default dispatch keeps decode-sized calls (below kAmxMinTokensDefault tokens) on the vector tiles;
// amx_min_tokens moves the threshold. gemm_path_isa names the path and the results follow it: a 2-token
// call with the default equals the AVX-512 ISA's bits, with amx_min_tokens = 1 the AMX kernel's.
TEST(KernelQuantMatmul, AmxDispatchThreshold) {
  if (!isa_supported(Isa::kAmx)) GTEST_SKIP() << "no AMX";
  EXPECT_EQ(gemm_path_isa(Isa::kAmx, 1, 4096), Isa::kAvx512);
  EXPECT_EQ(gemm_path_isa(Isa::kAmx, kAmxMinTokensDefault - 1, 4096), Isa::kAvx512);
  EXPECT_EQ(gemm_path_isa(Isa::kAmx, kAmxMinTokensDefault, 4096), Isa::kAmx);
  EXPECT_EQ(gemm_path_isa(Isa::kAmx, 1, 4096, 1), Isa::kAmx);
  EXPECT_EQ(gemm_path_isa(Isa::kAmx, 64, 4100, 1), Isa::kAvx512);  // k % 32 != 0
  std::mt19937 rng(77);
  Fp8Case c = make_fp8(rng, 48, 512, 0);
  const std::vector<float> x = make_x(rng, 2, 512, 0);
  std::vector<float> dflt(96), avx(96), amx(96);
  fp8_gemm(c.w, x.data(), 2, dflt.data(), MatmulOptions{false, Isa::kAmx, nullptr});
  fp8_gemm(c.w, x.data(), 2, avx.data(), MatmulOptions{false, Isa::kAvx512, nullptr});
  fp8_gemm(c.w, x.data(), 2, amx.data(), MatmulOptions{false, Isa::kAmx, nullptr, 1});
  EXPECT_EQ(dflt, avx);
  EXPECT_NE(amx, avx);  // another summation order: some of 96 sums differ in their last bits
}

TEST(KernelQuantMatmul, EmptyShapes) {
  ThreadPool pool(2);
  for (Isa isa : {Isa::kScalar, Isa::kAuto}) {
    // K = 0: every output is the empty sum.
    std::vector<uint8_t> scales(1, 127);
    std::vector<float> out(6, -1.0f);
    Fp8Matrix w8{nullptr, scales.data(), 3, 0};
    fp8_gemm(w8, nullptr, 2, out.data(), MatmulOptions{true, isa, &pool, 1});
    for (float v : out) EXPECT_EQ(v, 0.0f);
    out.assign(6, -1.0f);
    Fp4Matrix w4{nullptr, nullptr, 3, 0};
    fp4_gemm(w4, nullptr, 2, out.data(), MatmulOptions{true, isa, &pool, 1});
    for (float v : out) EXPECT_EQ(v, 0.0f);
    // No rows or no tokens: nothing is written.
    out.assign(6, -1.0f);
    fp8_gemm(Fp8Matrix{nullptr, nullptr, 0, 128}, nullptr, 2, out.data(), MatmulOptions{true, isa, &pool, 1});
    fp4_gemm(Fp4Matrix{nullptr, nullptr, 3, 64}, nullptr, 0, out.data(), MatmulOptions{true, isa, &pool, 1});
    for (float v : out) EXPECT_EQ(v, -1.0f);
  }
}

TEST(KernelQuantMatmul, IsaNamesRoundTrip) {
  for (Isa isa : {Isa::kAuto, Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAmx}) {
    Isa parsed = Isa::kScalar;
    ASSERT_TRUE(parse_isa(isa_name(isa), &parsed));
    EXPECT_EQ(parsed, isa);
  }
  Isa dummy;
  EXPECT_FALSE(parse_isa("sse9", &dummy));
  EXPECT_TRUE(isa_supported(resolve_isa(Isa::kAvx512)));
}

// The CPU family that picks the decode-order prefetch distance (row_pairs.h stream_prefetch_bytes): the
// leaf-1 arithmetic on known signatures, and this machine's model against what Linux reports in
// /proc/cpuinfo (its own decoding of the same CPUID leaves).
TEST(KernelQuantMatmul, CpuFamilyFromCpuid) {
  EXPECT_EQ(cpu_family_from_leaf1(0x00B00F21u), 0x1A);  // AMD Zen 5 (EPYC 9005): base 0xF + extended 0xB
  EXPECT_EQ(cpu_family_from_leaf1(0x00A10F11u), 0x19);  // AMD Zen 4 (EPYC 9004)
  EXPECT_EQ(cpu_family_from_leaf1(0x00A00F11u), 0x19);  // AMD Zen 3 (EPYC 7003)
  EXPECT_EQ(cpu_family_from_leaf1(0x000806F8u), 6);     // Intel Sapphire Rapids: base 6, extended not added
  EXPECT_EQ(cpu_family_from_leaf1(0x0FF00F00u), 0xF + 0xFF);  // every extended-family bit, nothing above
  EXPECT_EQ(cpu_family_from_leaf1(0x00000F29u), 0xF);    // base 0xF with extended 0
#if defined(__x86_64__) && defined(__linux__)
  std::ifstream info("/proc/cpuinfo");
  ASSERT_TRUE(info.good()) << "x86-64 Linux without /proc/cpuinfo";
  std::string line, vendor;
  int family = -1;
  while (std::getline(info, line) && (vendor.empty() || family < 0)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "vendor_id") vendor = value;
    if (line.rfind("cpu family", 0) == 0) family = std::stoi(value);
  }
  ASSERT_FALSE(vendor.empty());
  ASSERT_GE(family, 0);
  const CpuModel cpu = cpu_model();
  EXPECT_EQ(cpu.family, family);
  EXPECT_EQ(cpu.vendor == CpuVendor::kIntel, vendor == "GenuineIntel");
  EXPECT_EQ(cpu.vendor == CpuVendor::kAmd, vendor == "AuthenticAMD");
  EXPECT_EQ(is_intel_cpu(), vendor == "GenuineIntel");
  // The rule itself: 2 KiB ahead on Intel and on AMD from Zen 5, 0 elsewhere.
  const bool far = vendor == "GenuineIntel" || (vendor == "AuthenticAMD" && family >= 0x1A);
  EXPECT_EQ(detail::stream_prefetch_bytes(), far ? 2048 : 0);
#endif
}

}  // namespace
}  // namespace dsv4::kernels
