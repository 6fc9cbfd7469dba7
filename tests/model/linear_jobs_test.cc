// tests/model: linear_jobs and grouped_linear (model/deepseek_v4/linear.h) on 2 threads give exactly the
// bits of linear() called per job (per group, on dense copies) on one thread, for FP8, FP4 and BF16
// weights, on the AVX-512 tiles and on AMX, at 1..17 tokens: the one-token fused dispatch (shared inputs
// quantized once, row chunks of several ~1 MiB) and the multi-token path alike.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "model/deepseek_v4/linear.h"

namespace dsv4::test {
namespace {

using v4::LinearJob;

// Random packed weight bytes that decode to finite values: E4M3 codes without the NaN pair, E8M0 scales
// near 1, any E2M1 nibble.
struct RandomWeight {
  std::vector<uint8_t> codes, scales;
  std::vector<uint16_t> bf16;
  LinearWeight w;

  RandomWeight(WeightFormat f, int64_t rows, int64_t k, std::mt19937& rng) {
    std::uniform_int_distribution<int> byte(0, 255), scale(120, 130);
    w.format = f;
    w.params.n_in = k;
    w.params.n_out = rows;
    w.params.out_round = ref::OutRound::kBf16;
    switch (f) {
      case WeightFormat::kFp8:
        codes.resize(static_cast<size_t>(rows * k));
        for (uint8_t& c : codes) c = static_cast<uint8_t>(byte(rng) & 0xF7);  // 0x7F/0xFF are NaN
        scales.resize(static_cast<size_t>(((rows + 127) / 128) * ((k + 127) / 128)));
        for (uint8_t& s : scales) s = static_cast<uint8_t>(scale(rng));
        w.params.act_quant = ref::ActQuant::kFp8Block128;
        w.fp8 = {codes.data(), scales.data(), rows, k};
        break;
      case WeightFormat::kFp4:
        codes.resize(static_cast<size_t>(rows * k / 2));
        for (uint8_t& c : codes) c = static_cast<uint8_t>(byte(rng));
        scales.resize(static_cast<size_t>(rows * k / 32));
        for (uint8_t& s : scales) s = static_cast<uint8_t>(scale(rng));
        w.params.act_quant = ref::ActQuant::kFp8Block128;
        w.fp4 = {codes.data(), scales.data(), rows, k};
        break;
      case WeightFormat::kBf16: {
        std::normal_distribution<float> g(0.0f, 0.05f);
        bf16.resize(static_cast<size_t>(rows * k));
        for (uint16_t& b : bf16) {
          const float v = g(rng);
          uint32_t u;
          std::memcpy(&u, &v, 4);
          b = static_cast<uint16_t>(u >> 16);
        }
        w.bf16 = {bf16.data(), rows, k};
        w.params.out_round = ref::OutRound::kF32;
        break;
      }
      case WeightFormat::kF32: break;
    }
  }
};

std::vector<float> random_x(int64_t size, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(size));
  for (float& v : x) v = g(rng);
  return x;
}

v4::Execution cpu_execution(ThreadPool* pool, kernels::Isa isa) {
  v4::Execution ex;
  ex.backend = Backend::kCpu;
  ex.pool = pool;
  ex.isa = isa;
  return ex;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(LinearJobs, FusedMatchesLinearPerJob) {
  std::mt19937 rng(7);
  // A shared input (two FP8 jobs: wq_a/wkv-like; the larger spans several row chunks at every n), an FP4
  // and a BF16 job on inputs of their own.
  RandomWeight big(WeightFormat::kFp8, 4224, 512, rng), small(WeightFormat::kFp8, 256, 512, rng);
  RandomWeight fp4(WeightFormat::kFp4, 384, 256, rng), bf(WeightFormat::kBf16, 256, 256, rng);
  ThreadPool pool(2), one(1);
  for (kernels::Isa isa : {kernels::Isa::kAvx512, kernels::Isa::kAmx}) {
    for (int64_t n : {1, 2, 3, 8, 16, 17}) {
      const std::vector<float> xa = random_x(n * 512, rng), xb = random_x(n * 256, rng), xc = random_x(n * 256, rng);
      std::vector<float> y[4], want[4];
      const LinearWeight* ws[4] = {&big.w, &small.w, &fp4.w, &bf.w};
      const float* xs[4] = {xa.data(), xa.data(), xb.data(), xc.data()};
      LinearJob jobs[4];
      for (int j = 0; j < 4; ++j) {
        y[j].assign(static_cast<size_t>(n * ws[j]->params.n_out), -1.0f);
        want[j].assign(y[j].size(), -2.0f);
        jobs[j] = {ws[j], xs[j], y[j].data()};
        v4::linear(cpu_execution(&one, isa), *ws[j], xs[j], n, want[j].data());
      }
      v4::linear_jobs(cpu_execution(&pool, isa), jobs, n);
      for (int j = 0; j < 4; ++j)
        EXPECT_TRUE(same_bits(y[j], want[j])) << "isa " << kernels::isa_name(isa) << " n " << n << " job " << j;
    }
  }
}

TEST(LinearJobs, GroupedMatchesLinearPerGroup) {
  std::mt19937 rng(11);
  constexpr int64_t kGroups = 4, kRows = 256, kIn = 384;
  for (WeightFormat f : {WeightFormat::kFp8, WeightFormat::kBf16}) {
    RandomWeight w(f, kGroups * kRows, kIn, rng);
    ThreadPool pool(2), one(1);
    for (kernels::Isa isa : {kernels::Isa::kAvx512, kernels::Isa::kAmx}) {
      for (int64_t n : {1, 2, 5, 16, 17}) {
        const std::vector<float> x = random_x(n * kGroups * kIn, rng);  // [n, G, k]
        std::vector<float> out(static_cast<size_t>(n * kGroups * kRows), -1.0f), want(out.size(), -2.0f);
        // The oracle: group g's dense input [n, k] through linear() on its row block, scattered back.
        std::vector<float> xg(static_cast<size_t>(n * kIn)), yg(static_cast<size_t>(n * kRows));
        for (int64_t g = 0; g < kGroups; ++g) {
          LinearWeight s = w.w;
          s.params.n_out = kRows;
          if (f == WeightFormat::kFp8)
            s.fp8 = {w.w.fp8.codes + g * kRows * kIn, w.w.fp8.scales + (g * kRows / 128) * ((kIn + 127) / 128), kRows, kIn};
          else
            s.bf16 = {w.w.bf16.data + g * kRows * kIn, kRows, kIn};
          for (int64_t i = 0; i < n; ++i)
            std::memcpy(&xg[static_cast<size_t>(i * kIn)], &x[static_cast<size_t>((i * kGroups + g) * kIn)], kIn * sizeof(float));
          v4::linear(cpu_execution(&one, isa), s, xg.data(), n, yg.data());
          for (int64_t i = 0; i < n; ++i)
            std::memcpy(&want[static_cast<size_t>((i * kGroups + g) * kRows)], &yg[static_cast<size_t>(i * kRows)], kRows * sizeof(float));
        }
        v4::grouped_linear(cpu_execution(&pool, isa), w.w, kGroups, x.data(), n, out.data());
        EXPECT_TRUE(same_bits(out, want)) << "isa " << kernels::isa_name(isa) << " n " << n;
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::test
