// unit: the quantized GEMMs give the same bits under any schedule of the pool's dynamic chunks — every
// thread count, and uneven schedules forced by delaying chosen threads (the caller, one worker, every
// other chunk) — as on the calling thread alone. The oracle is the pool-less run: each output row comes
// from one fixed tile sequence, so who claims which chunk must not matter.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/formats.h"
#include "core/quant.h"
#include "core/thread_pool.h"
#include "kernels/cpu/quant_matmul.h"

namespace dsv4::kernels {
namespace {

void delay() { std::this_thread::sleep_for(std::chrono::microseconds(300)); }

// The schedules: none forced, the caller late, worker slot 1 late, every odd chunk late.
const ThreadPool::ChunkHook kHooks[] = {
    nullptr,
    [](int slot, int64_t) {
      if (slot == 0) delay();
    },
    [](int slot, int64_t) {
      if (slot == 1) delay();
    },
    [](int, int64_t chunk) {
      if (chunk % 2 == 1) delay();
    },
};

struct Weights {
  std::vector<uint8_t> fp8_codes, fp8_scales, fp4_packed, fp4_scales;
  std::vector<uint16_t> bf16;
};

// rows: a multiple of 16 plus a tail (a partial row grain at the end), k a multiple of 128.
Weights make_weights(std::mt19937& rng, int64_t rows, int64_t k) {
  Weights w;
  std::uniform_int_distribution<int> byte(0, 255), ex(127 - 8, 127 + 2);
  w.fp8_codes.resize(static_cast<size_t>(rows * k));
  for (auto& b : w.fp8_codes) {
    do b = static_cast<uint8_t>(byte(rng));
    while ((b & 0x7F) == 0x7F);  // NaN codes are not weights
  }
  w.fp8_scales.resize(static_cast<size_t>(((rows + 127) / 128) * (k / 128)));
  for (auto& s : w.fp8_scales) s = static_cast<uint8_t>(ex(rng));
  w.fp4_packed.resize(static_cast<size_t>(rows * k / 2));
  for (auto& b : w.fp4_packed) b = static_cast<uint8_t>(byte(rng));
  w.fp4_scales.resize(static_cast<size_t>(rows * k / 32));
  for (auto& s : w.fp4_scales) s = static_cast<uint8_t>(ex(rng));
  std::normal_distribution<float> nd(0.0f, 0.05f);
  w.bf16.resize(static_cast<size_t>(rows * k));
  for (auto& v : w.bf16) v = float_to_bf16(nd(rng));
  return w;
}

TEST(KernelSchedule, GemmsAreBitIdenticalUnderEveryThreadCountAndForcedSchedule) {
  std::mt19937 rng(7);
  const int64_t rows = 16 * 37 + 5, k = 256;
  const Weights w = make_weights(rng, rows, k);
  const Fp8Matrix f8{w.fp8_codes.data(), w.fp8_scales.data(), rows, k};
  const Fp4Matrix f4{w.fp4_packed.data(), w.fp4_scales.data(), rows, k};
  const Bf16Matrix b16{w.bf16.data(), rows, k};
  using Gemm = void (*)(const void*, const float*, int64_t, float*, const MatmulOptions&);
  const struct {
    const char* name;
    const void* w;
    Gemm gemm;
  } kinds[] = {
      {"fp8", &f8, [](const void* m, const float* x, int64_t t, float* o, const MatmulOptions& opt) {
         fp8_gemm(*static_cast<const Fp8Matrix*>(m), x, t, o, opt);
       }},
      {"fp4", &f4, [](const void* m, const float* x, int64_t t, float* o, const MatmulOptions& opt) {
         fp4_gemm(*static_cast<const Fp4Matrix*>(m), x, t, o, opt);
       }},
      {"bf16", &b16, [](const void* m, const float* x, int64_t t, float* o, const MatmulOptions& opt) {
         bf16_gemm(*static_cast<const Bf16Matrix*>(m), x, t, o, opt);
       }},
  };
  // Decode (1 token), a full 8-token tile, and a prefill-sized batch (the AMX path where the CPU has it).
  for (int64_t n_tokens : {1, 8, 24}) {
    std::vector<float> x(static_cast<size_t>(n_tokens * k));
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& v : x) v = nd(rng);
    for (int64_t t = 0; t < n_tokens; ++t) fake_quant_fp8(std::span<float>(x.data() + t * k, static_cast<size_t>(k)), 128);
    for (const auto& kind : kinds) {
      MatmulOptions opt;
      std::vector<float> alone(static_cast<size_t>(n_tokens * rows));
      kind.gemm(kind.w, x.data(), n_tokens, alone.data(), opt);
      for (int threads : {2, 3, 4}) {
        ThreadPool pool(threads);
        opt.pool = &pool;
        for (size_t h = 0; h < std::size(kHooks); ++h) {
          pool.set_chunk_hook_for_testing(kHooks[h]);
          std::vector<float> got(alone.size(), -1.0f);
          kind.gemm(kind.w, x.data(), n_tokens, got.data(), opt);
          EXPECT_EQ(std::memcmp(got.data(), alone.data(), alone.size() * sizeof(float)), 0)
              << kind.name << " tokens " << n_tokens << " threads " << threads << " schedule " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels
