// unit: bf16_gemm on Isa::kAvx512Bf16 (the VDPBF16PS tile) bit-exact against a scalar emulation of the
// fp32 order its file documents (quant_tiles_bf16_avx512bf16.cc): per 16 lanes, each 32-column step adds
// the odd column's product, then the even one's, each rounded to fp32; then a lane tree l+8, l+4, l+2,
// l+1. Inside the guard (bf16-exact activations, nonzero |x| and |w| ≥ 2^-56) that order is exact fp32
// arithmetic, so the emulation written here with plain floats must match to the bit. Outside it (tiny or
// denormal weights, tiny or inexact activations) the affected (row, token) sums must be the AVX-512 fp32
// tile's bits, and only those. The grids in kernel_quant_matmul_test.cc check the bound, threads and batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles.h"

namespace dsv4::kernels {
namespace {

// The documented order in plain floats (the build has no FMA contraction: each + rounds once; each
// product of two bf16 values is exact in fp32).
float emulated_dot(const uint16_t* w, const float* x, int64_t k) {
  float lane[16] = {};
  auto prod = [&](int64_t i) { return i < k ? bf16_to_float(w[i]) * x[i] : 0.0f; };
  for (int64_t s = 0; s < k; s += 32)
    for (int l = 0; l < 16; ++l) lane[l] = (lane[l] + prod(s + 2 * l + 1)) + prod(s + 2 * l);
  float a[8], b[4], c[2];
  for (int l = 0; l < 8; ++l) a[l] = lane[l] + lane[l + 8];
  for (int l = 0; l < 4; ++l) b[l] = a[l] + a[l + 4];
  for (int l = 0; l < 2; ++l) c[l] = b[l] + b[l + 2];
  return c[0] + c[1];
}

// bf16-exact activations spread over many binades (scales 2^-12..2^12), and bf16 weights N(0, 0.05).
std::vector<float> make_x(std::mt19937& rng, int64_t m, int64_t k, size_t off) {
  std::vector<float> x(off + static_cast<size_t>(m * k) + 1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> e(-12, 12);
  for (auto& v : x) v = round_bf16(std::ldexp(nd(rng), e(rng)));
  return x;
}

std::vector<uint16_t> make_w(std::mt19937& rng, int64_t n, int64_t k, size_t off) {
  std::vector<uint16_t> w(off + static_cast<size_t>(n * k) + 1);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (auto& v : w) v = float_to_bf16(nd(rng));
  return w;
}

bool have_tier() { return isa_supported(Isa::kAvx512Bf16); }

void expect_emulated(const Bf16Matrix& w, const float* x, int64_t m, const std::vector<float>& got,
                     const std::string& what) {
  const int64_t n = w.n_rows, k = w.n_cols;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t r = 0; r < n; ++r) {
      const float want = emulated_dot(w.data + r * k, x + t * k, k);
      const float g = got[static_cast<size_t>(t * n + r)];
      ASSERT_EQ(0, std::memcmp(&want, &g, sizeof(float)))
          << what << " row " << r << " token " << t << " got " << g << " emulated " << want;
    }
}

// Every row count around the 4-row tile and the 16-row grain, tokens 1..8 plus two tiles' worth, K with
// every kind of tail (below one step, one step ± 1, many steps + partial), misaligned weights and
// activations, serial and on 3 threads.
TEST(KernelBf16Dot, BitExactAgainstEmulatedOrder) {
  if (!have_tier()) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(2026);
  ThreadPool pool(3);
  const uint64_t refusals = bf16_refusals();
  int cases = 0;
  for (int64_t n : {1, 2, 3, 4, 5, 17, 33, 257}) {
    for (int64_t k : {1, 2, 31, 32, 33, 64, 100, 4096, 4097 + 32}) {  // past 4096: two column chunks
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 13}) {
        if (k >= 4096 && n > 5 && m > 2) continue;  // the long K once per tile shape is enough
        const size_t off = static_cast<size_t>(cases++ % 3);
        const std::vector<uint16_t> wbuf = make_w(rng, n, k, off);
        const std::vector<float> xbuf = make_x(rng, m, k, off);
        const Bf16Matrix w{wbuf.data() + off, n, k};
        const float* x = xbuf.data() + off;
        const std::string what = "n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m);
        std::vector<float> out(static_cast<size_t>(m * n), -1.0f), threaded(out.size(), -2.0f);
        bf16_gemm(w, x, m, out.data(), MatmulOptions{false, Isa::kAvx512Bf16, nullptr, 1});
        expect_emulated(w, x, m, out, what);
        bf16_gemm(w, x, m, threaded.data(), MatmulOptions{false, Isa::kAvx512Bf16, &pool, 1});
        ASSERT_EQ(0, std::memcmp(out.data(), threaded.data(), out.size() * sizeof(float))) << what << " threads";
        // The rows' guard found once (the model's loader): the tile skips its own check, same bits.
        std::vector<uint8_t> row_ok(static_cast<size_t>(n), 2);
        bf16_rows_in_guard(w.data, n, k, row_ok.data());
        for (uint8_t v : row_ok) ASSERT_EQ(v, 1) << what;
        bf16_gemm(Bf16Matrix{w.data, n, k, row_ok.data()}, x, m, threaded.data(),
                  MatmulOptions{false, Isa::kAvx512Bf16, &pool, 1});
        ASSERT_EQ(0, std::memcmp(out.data(), threaded.data(), out.size() * sizeof(float))) << what << " row_ok";
      }
    }
  }
  EXPECT_EQ(bf16_refusals(), refusals) << "every case was inside the guard";
}

// The tile called directly at every shape (1..4 rows × 1..8 tokens, the rows at every place in it): each
// (row, token) sum is the emulated one, so it does not depend on the tile's shape.
TEST(KernelBf16Dot, TileEveryShapeBitExact) {
  if (!have_tier()) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(5);
  for (int64_t k : {1, 31, 32, 33, 300}) {
    constexpr int kRows = detail::kBf16TileRows;
    const std::vector<uint16_t> w = make_w(rng, kRows, k, 0);
    const std::vector<float> x = make_x(rng, 8, k, 0);
    const int64_t ldxb = detail::bf16_x_stride(k);
    std::vector<uint16_t> xb_buf(static_cast<size_t>(8 * ldxb) + 32);
    uint16_t* xb = detail::align64(xb_buf.data());
    uint8_t ok[8];
    ASSERT_EQ(8, detail::bf16_pack_x(x.data(), 8, k, xb, ok));
    for (int rows = 1; rows <= kRows; ++rows)
      for (int first = 0; first + rows <= kRows; ++first)
        for (int tokens = 1; tokens <= 16; ++tokens) {  // 9..16: the same shapes, the rows' guard known
          detail::Bf16Tile t;
          for (int r = 0; r < rows; ++r) t.w[r] = w.data() + (first + r) * k;
          for (int r = 0; r < rows; ++r) t.w_ok[r] = tokens > 8 ? 1 : -1;
          t.n_rows = rows;
          t.x = x.data();
          t.ldx = k;
          t.n_tokens = (tokens - 1) % 8 + 1;
          t.k = k;
          t.xb = xb;
          t.ldxb = ldxb;
          t.x_ok = ok;
          detail::bf16_tile_avx512bf16(t);
          for (int r = 0; r < rows; ++r)
            for (int j = 0; j < t.n_tokens; ++j) {
              const float want = emulated_dot(t.w[r], x.data() + j * k, k);
              ASSERT_EQ(0, std::memcmp(&want, &t.sums[r][j], sizeof(float)))
                  << "k=" << k << " tile " << rows << "x" << t.n_tokens << " row " << first + r << " token " << j
                  << (tokens > 8 ? " (guard known)" : "");
            }
        }
  }
}

// Outside the guard: rows with a tiny (2^-60) or a denormal weight, tokens with a tiny (2^-60) or a
// non-bf16 activation. Their (row, token) sums are the AVX-512 fp32 tile's bits, every other sum the
// emulated one; the choice is per row and per token (batch invariance), and the refusal tally moves. The
// denormal weight meets a 2^40 activation (DAZ would drop its 3·2^-93 product). Removing the guard fails
// this test (those sums then take the VDPBF16PS order, not the fp32 tile's).
TEST(KernelBf16Dot, GuardFallsBackPerRowAndToken) {
  if (!have_tier()) GTEST_SKIP() << "no AVX512_BF16";
  std::mt19937 rng(11);
  ThreadPool pool(3);
  const int64_t n = 11;
  for (const auto& [m, k] : {std::pair<int64_t, int64_t>{7, 40}, {7, 256}, {8, 40}, {8, 256}}) {  // 8: 4 x 4 passes
    std::vector<uint16_t> wbuf = make_w(rng, n, k, 0);
    std::vector<float> x = make_x(rng, m, k, 0);
    // Rows 2, 7: a tiny weight; row 5: a denormal one. Column 3 of every other row and token is zero, so
    // those columns add nothing elsewhere.
    for (int64_t r = 0; r < n; ++r) wbuf[static_cast<size_t>(r * k + 3)] = 0;
    for (int64_t t = 0; t < m; ++t) x[static_cast<size_t>(t * k + 3)] = 0.0f;
    wbuf[static_cast<size_t>(2 * k + 3)] = float_to_bf16(std::ldexp(1.0f, -60));
    wbuf[static_cast<size_t>(7 * k + 3)] = float_to_bf16(-std::ldexp(1.5f, -60));
    wbuf[static_cast<size_t>(5 * k + 3)] = 0x0003;  // denormal bf16: 3 · 2^-133
    // Token 1: a tiny activation; token 4: a value bf16 cannot hold; token 6: 2^40 against the denormal.
    x[static_cast<size_t>(1 * k + 3)] = std::ldexp(1.0f, -60);
    x[static_cast<size_t>(4 * k + 5)] = 1.0f + std::ldexp(1.0f, -20);
    x[static_cast<size_t>(6 * k + 3)] = std::ldexp(1.0f, 40);
    const auto bad_row = [](int64_t r) { return r == 2 || r == 5 || r == 7; };
    const auto bad_token = [](int64_t t) { return t == 1 || t == 4; };
    std::vector<uint8_t> row_ok(static_cast<size_t>(n), 2);
    bf16_rows_in_guard(wbuf.data(), n, k, row_ok.data());
    for (int64_t r = 0; r < n; ++r) ASSERT_EQ(row_ok[static_cast<size_t>(r)], bad_row(r) ? 0 : 1) << "row " << r;
    // The tile checking each row it loads, then the rows' guard found once (the model's loader).
    for (const uint8_t* known : {static_cast<const uint8_t*>(nullptr), static_cast<const uint8_t*>(row_ok.data())}) {
      const Bf16Matrix w{wbuf.data(), n, k, known};
      std::vector<float> fp32(static_cast<size_t>(m * n)), dot(fp32.size()), threaded(fp32.size());
      bf16_gemm(w, x.data(), m, fp32.data(), MatmulOptions{false, Isa::kAvx512, nullptr, 1});
      const uint64_t before = bf16_refusals();
      bf16_gemm(w, x.data(), m, dot.data(), MatmulOptions{false, Isa::kAvx512Bf16, nullptr, 1});
      EXPECT_GT(bf16_refusals(), before) << "k=" << k;
      bf16_gemm(w, x.data(), m, threaded.data(), MatmulOptions{false, Isa::kAvx512Bf16, &pool, 1});
      ASSERT_EQ(0, std::memcmp(dot.data(), threaded.data(), dot.size() * sizeof(float))) << "k=" << k << " threads";
      for (int64_t t = 0; t < m; ++t)
        for (int64_t r = 0; r < n; ++r) {
          const size_t i = static_cast<size_t>(t * n + r);
          const std::string at = "m=" + std::to_string(m) + " k=" + std::to_string(k) + " row " + std::to_string(r) +
                                 " token " + std::to_string(t);
          if (bad_row(r) || bad_token(t)) {
            ASSERT_EQ(0, std::memcmp(&fp32[i], &dot[i], sizeof(float)))
                << at << " fp32 " << fp32[i] << " got " << dot[i];
          } else {
            const float want = emulated_dot(wbuf.data() + r * k, x.data() + t * k, k);
            ASSERT_EQ(0, std::memcmp(&want, &dot[i], sizeof(float))) << at;
          }
        }
      // Each token alone: the same bits (the guard's choice for a token never depends on the others).
      std::vector<float> single(static_cast<size_t>(n));
      for (int64_t t = 0; t < m; ++t) {
        bf16_gemm(w, x.data() + t * k, 1, single.data(), MatmulOptions{false, Isa::kAvx512Bf16, nullptr, 1});
        ASSERT_EQ(0, std::memcmp(single.data(), dot.data() + t * n, single.size() * sizeof(float))) << "token " << t;
      }
    }
  }
}

// bf16_rows_in_guard against the guard's definition on float values: a row is inside unless some weight is
// nonzero with |w| < 2^-56 (denormals included); zeros of either sign, 2^-56 itself, infinities and NaNs
// are inside. Each offending value alone in an otherwise normal row, at the first, a middle and the last
// column.
TEST(KernelBf16Dot, RowsInGuardFollowsTheDefinition) {
  const uint16_t cases[] = {0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x237F, 0xA37F, 0x2380,
                            0xA380, 0x3F80, 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0040};
  const int64_t k = 37;
  for (uint16_t v : cases) {
    const float f = bf16_to_float(v);
    const bool inside = f == 0.0f || !(std::fabs(f) < std::ldexp(1.0f, -56));  // NaN compares false: inside
    for (int64_t col : {int64_t{0}, int64_t{18}, k - 1}) {
      std::vector<uint16_t> w(static_cast<size_t>(3 * k), float_to_bf16(0.25f));
      w[static_cast<size_t>(k + col)] = v;  // row 1
      uint8_t ok[3] = {9, 9, 9};
      bf16_rows_in_guard(w.data(), 3, k, ok);
      EXPECT_EQ(ok[0], 1);
      EXPECT_EQ(ok[1], inside ? 1 : 0) << std::hex << "bits 0x" << v << " col " << std::dec << col;
      EXPECT_EQ(ok[2], 1);
    }
  }
  uint8_t none = 7;
  bf16_rows_in_guard(nullptr, 0, 5, &none);  // no rows: nothing written
  EXPECT_EQ(none, 7);
}

}  // namespace
}  // namespace dsv4::kernels
