// tests/model: no kernel refuses the model's activations as inexact in bf16 (kernels/cpu/bf16_refusals.h),
// and the AVX2 FP4 tile holds every one in its exact fixed point (kernels/cpu/fp4_float_groups.h: no
// 64-element group falls back to its fp32 path).
// The AMX GEMMs, the AMX indexer scores, the MoE layer's packs and the FP4 nibble-plane tile decide per
// call (or per 16-key group) whether the activations are exact in bf16; a refusal would move every row of
// the call to another summation order, so one stream's row could change its batch neighbours' bits. The
// model rounds every activation these kernels see to bf16 (spec §2.0) or fake-quantizes it (§3); these
// tests hold that over real forwards of the tiny golden checkpoint — one-shot and chunked prefill,
// decode, the MTP draft, and several streams in one step — on every fast-path routing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "golden_case.h"
#include "kernels/cpu/bf16_refusals.h"
#include "kernels/cpu/fp4_float_groups.h"
#include "kernels/cpu/quant_matmul.h"
#include "model/model.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

struct Routing {
  const char* name;
  kernels::Isa isa;
  kernels::AmxRouting amx;
};

// AVX-512 (the FP4 nibble-plane choice), AVX512_BF16 (the FP4 VDPBF16PS tile's), AMX with the default routing (routed experts move to AMX from
// 16 rows, so a 40-token prefill exercises both), and every weight on AMX from 1 row.
std::vector<Routing> routings() {
  std::vector<Routing> out;
  if (kernels::isa_supported(kernels::Isa::kAvx512)) out.push_back({"avx512", kernels::Isa::kAvx512, {}});
  // The VDPBF16PS tier: its FP4 and FP8 tiles refuse inexact activations and nonzero ones below 2^-100.
  if (kernels::isa_supported(kernels::Isa::kAvx512Bf16)) out.push_back({"avx512bf16", kernels::Isa::kAvx512Bf16, {}});
  if (kernels::isa_supported(kernels::Isa::kAmx)) {
    out.push_back({"amx_default", kernels::Isa::kAmx, {}});
    out.push_back({"amx_everywhere", kernels::Isa::kAmx, {1, 1}});
  }
  return out;
}

std::unique_ptr<Model> load(const Routing& r) {
  ModelOptions o;
  o.backend = Backend::kCpu;
  o.isa = r.isa;
  o.threads = 2;
  o.amx = r.amx;
  auto m = Model::load(shared_dir() / "golden/tiny/checkpoint", o);
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

// One stream: prefill of `prefill` ids in chunks of `chunk` (every row's logits), the MTP draft over the
// first chunk's rows, then one-token decode steps to the end of ids.
void run_stream(const Model& m, const std::vector<int32_t>& ids, int32_t prefill, int32_t chunk) {
  auto seq = m.new_sequence();
  SequenceState* st[] = {seq.get()};
  std::vector<float> logits;
  for (int32_t p0 = 0; p0 < prefill; p0 += chunk) {
    std::vector<BatchToken> batch;
    for (int32_t i = p0; i < std::min(prefill, p0 + chunk); ++i) batch.push_back({0, i, ids[static_cast<size_t>(i)], true});
    ForwardCapture cap;
    ASSERT_TRUE(m.forward(batch, st, &logits, &cap).is_ok());
    if (p0 == 0 && batch.size() > 1) {
      std::vector<BatchToken> mtp;
      for (size_t i = 0; i + 1 < batch.size(); ++i) mtp.push_back({0, static_cast<int32_t>(i), ids[i + 1], true});
      const auto streams = std::span<const float>(cap.final_streams).first(mtp.size() * cap.final_streams.size() / batch.size());
      ASSERT_TRUE(m.forward_mtp(mtp, streams, st, &logits).is_ok());
    }
  }
  for (size_t i = static_cast<size_t>(prefill); i < ids.size(); ++i)
    ASSERT_TRUE(m.forward(std::vector<BatchToken>{{0, static_cast<int32_t>(i), ids[i], true}}, st, &logits).is_ok());
}

// Three streams in each step: their prefills together (3 × 24 rows), then 6 decode steps of 3 rows, each
// row at its own position.
void run_streams(const Model& m, const std::vector<int32_t>& ids) {
  std::vector<std::unique_ptr<SequenceState>> seqs;
  std::vector<SequenceState*> st;
  for (int s = 0; s < 3; ++s) {
    seqs.push_back(m.new_sequence());
    st.push_back(seqs.back().get());
  }
  std::vector<float> logits;
  std::vector<BatchToken> batch;
  for (int32_t s = 0; s < 3; ++s)
    for (int32_t i = 0; i < 24 + 4 * s; ++i) batch.push_back({s, i, ids[static_cast<size_t>(i + 5 * s)], true});
  ASSERT_TRUE(m.forward(batch, st, &logits).is_ok());
  for (int32_t step = 0; step < 6; ++step) {
    batch.clear();
    for (int32_t s = 0; s < 3; ++s) batch.push_back({s, 24 + 4 * s + step, ids[static_cast<size_t>(24 + 9 * s + step)], true});
    ASSERT_TRUE(m.forward(batch, st, &logits).is_ok());
  }
}

TEST(Bf16Refusals, NoneAcrossRealForwards) {
  const auto routes = routings();
  if (routes.empty()) GTEST_SKIP() << "neither AVX-512 nor AMX: no kernel makes the bf16 decision";
  const auto ids = golden_tokens(72);  // crosses the window (64) and several compressor blocks
  ASSERT_EQ(ids.size(), 72u);
  for (const Routing& r : routes) {
    auto m = load(r);
    ASSERT_TRUE(m);
    const uint64_t before = kernels::bf16_refusals();
    run_stream(*m, ids, 40, 40);  // one-shot prefill ≥ 16 rows, MTP, 32 decode steps
    run_stream(*m, ids, 72, 7);   // chunked prefill (7-row chunks: below the routed AMX threshold)
    run_stream(*m, ids, 72, 64);  // a 64-row chunk then an 8-row one
    run_streams(*m, ids);
    EXPECT_EQ(kernels::bf16_refusals() - before, 0u) << r.name;
  }
}

// The tally is live: a GEMM whose activations bf16 cannot hold exactly counts one refusal on AMX (and
// through the FP4 tile choice on AVX-512, the FP8 one on AVX512-BF16), so the zero above is not the count of a path never taken.
TEST(Bf16Refusals, CountsAnInexactActivation) {
  const auto routes = routings();
  if (routes.empty()) GTEST_SKIP() << "neither AVX-512 nor AMX";
  const int64_t rows = 32, k = 128;
  std::vector<uint8_t> codes(static_cast<size_t>(rows * k), 0x38), fp4(static_cast<size_t>(rows * k / 2), 0x22);
  std::vector<uint8_t> scales8(1, 127), scales4(static_cast<size_t>(rows * k / 32), 127);
  std::vector<float> x(static_cast<size_t>(2 * k), 1.0f), out(static_cast<size_t>(2 * rows));
  for (const Routing& r : routes) {
    kernels::MatmulOptions opt;
    opt.isa = r.isa;
    opt.amx_min_tokens = 1;
    // FP8 makes the bf16 decision on AMX and on the VDPBF16PS tile (kAvx512Bf16); the AVX-512 tile takes any float.
    const bool fp8_decides = r.isa == kernels::Isa::kAmx || r.isa == kernels::Isa::kAvx512Bf16;
    uint64_t before = kernels::bf16_refusals();
    kernels::fp4_gemm({fp4.data(), scales4.data(), rows, k}, x.data(), 2, out.data(), opt);
    if (fp8_decides) kernels::fp8_gemm({codes.data(), scales8.data(), rows, k}, x.data(), 2, out.data(), opt);
    EXPECT_EQ(kernels::bf16_refusals() - before, 0u) << r.name;
    x[k + 5] = 1.0f + std::numeric_limits<float>::epsilon();  // the second token's: not a bf16 value
    before = kernels::bf16_refusals();
    kernels::fp4_gemm({fp4.data(), scales4.data(), rows, k}, x.data(), 2, out.data(), opt);
    EXPECT_GE(kernels::bf16_refusals() - before, 1u) << r.name << " fp4";
    if (fp8_decides) {
      before = kernels::bf16_refusals();
      kernels::fp8_gemm({codes.data(), scales8.data(), rows, k}, x.data(), 2, out.data(), opt);
      EXPECT_EQ(kernels::bf16_refusals() - before, 1u) << r.name << " fp8";
    }
    x[k + 5] = 1.0f;
  }
}

// The AVX2 FP4 tile over the same forwards: fake-quantized E4M3 activations are always exact in its fixed
// point, so no group takes the fp32 path; and the tally is live (a raw-float activation counts its group).
TEST(Fp4FixedPoint, NoFloatGroupsAcrossRealForwards) {
  if (!kernels::isa_supported(kernels::Isa::kAvx2)) GTEST_SKIP() << "no AVX2: the FP4 fixed point is its tile";
  const auto ids = golden_tokens(72);
  ASSERT_EQ(ids.size(), 72u);
  auto m = load({"avx2", kernels::Isa::kAvx2, {}});
  ASSERT_TRUE(m);
  const uint64_t before = kernels::fp4_float_groups();
  run_stream(*m, ids, 40, 40);
  run_stream(*m, ids, 72, 7);
  run_streams(*m, ids);
  EXPECT_EQ(kernels::fp4_float_groups() - before, 0u);

  const int64_t rows = 4, k = 128;
  std::vector<uint8_t> fp4(static_cast<size_t>(rows * k / 2), 0x22), scales(static_cast<size_t>(rows * k / 32), 127);
  std::vector<float> x(static_cast<size_t>(2 * k), 1.0f), out(static_cast<size_t>(2 * rows));
  kernels::MatmulOptions opt;
  opt.isa = kernels::Isa::kAvx2;
  uint64_t mark = kernels::fp4_float_groups();
  kernels::fp4_gemm({fp4.data(), scales.data(), rows, k}, x.data(), 2, out.data(), opt);
  EXPECT_EQ(kernels::fp4_float_groups() - mark, 0u);
  // Token 1, group 1: (1 + 2^-23)·2^-10 beside a block max of 1 has bits at 2^-33, under the 2^-30 grid.
  x[static_cast<size_t>(k + 70)] = std::ldexp(1.0f + std::numeric_limits<float>::epsilon(), -10);
  mark = kernels::fp4_float_groups();
  kernels::fp4_gemm({fp4.data(), scales.data(), rows, k}, x.data(), 2, out.data(), opt);
  EXPECT_EQ(kernels::fp4_float_groups() - mark, 1u);
}

}  // namespace
}  // namespace dsv4::test
