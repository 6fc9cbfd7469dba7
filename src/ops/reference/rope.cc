// ops/reference: RoPE tables and rotation (spec §2.0).
#include "ops/reference/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/formats.h"

namespace dsv4::ref {

void yarn_correction_range(const RopeParams& p, int64_t* low, int64_t* high) {
  auto corr = [&](double n_rot) {
    return static_cast<double>(p.rope_dim) *
           std::log(static_cast<double>(p.original_seq_len) / (n_rot * 2.0 * std::numbers::pi)) /
           (2.0 * std::log(p.base));
  };
  *low = std::max<int64_t>(static_cast<int64_t>(std::floor(corr(p.beta_fast))), 0);
  *high = std::min<int64_t>(static_cast<int64_t>(std::ceil(corr(p.beta_slow))), p.rope_dim - 1);
}

std::vector<float> rope_frequencies(const RopeParams& p) {
  const int64_t half = p.rope_dim / 2;
  std::vector<float> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(p.rope_dim);
    const float powv = static_cast<float>(std::pow(static_cast<double>(static_cast<float>(p.base)),
                                                   static_cast<double>(e)));
    f[static_cast<size_t>(i)] = 1.0f / powv;
  }
  if (p.yarn && p.original_seq_len > 0) {
    int64_t low = 0, high = 0;
    yarn_correction_range(p, &low, &high);
    float lo = static_cast<float>(low), hi = static_cast<float>(high);
    if (lo == hi) hi += 0.001f;
    const float factor = static_cast<float>(p.factor);
    for (int64_t i = 0; i < half; ++i) {
      const float ramp = std::clamp((static_cast<float>(i) - lo) / (hi - lo), 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      const float fi = f[static_cast<size_t>(i)];
      f[static_cast<size_t>(i)] = fi / factor * (1.0f - smooth) + fi * smooth;
    }
  }
  return f;
}

namespace {

// Pair i's cos and sin at position t: fp32 angle, double cos / sin rounded to fp32.
inline void pair_cos_sin(float t, float freq, float* c, float* s) {
  const float angle = t * freq;
  *c = static_cast<float>(std::cos(static_cast<double>(angle)));
  *s = static_cast<float>(std::sin(static_cast<double>(angle)));
}

// Rotates pair (x[0], x[1]) by (c, s) (inverse: the conjugate), rounded to bf16.
inline void rotate_pair(float* x, float c, float s, bool inverse) {
  if (inverse) s = -s;
  const float a = x[0], b = x[1];
  const float re = a * c - b * s;
  const float im = a * s + b * c;
  x[0] = round_bf16(re);
  x[1] = round_bf16(im);
}

}  // namespace

void apply_rope(float* x, int64_t rope_dim, const float* freqs, int64_t pos, bool inverse) {
  const float t = static_cast<float>(pos);
  for (int64_t i = 0; i < rope_dim / 2; ++i) {
    float c, s;
    pair_cos_sin(t, freqs[i], &c, &s);
    rotate_pair(x + 2 * i, c, s, inverse);
  }
}

void rope_cos_sin(int64_t rope_dim, const float* freqs, int64_t pos, float* cs) {
  const float t = static_cast<float>(pos);
  for (int64_t i = 0; i < rope_dim / 2; ++i) pair_cos_sin(t, freqs[i], cs + 2 * i, cs + 2 * i + 1);
}

void apply_rope_cs(float* x, int64_t rope_dim, const float* cs, bool inverse) {
  for (int64_t i = 0; i < rope_dim / 2; ++i) rotate_pair(x + 2 * i, cs[2 * i], cs[2 * i + 1], inverse);
}

}  // namespace dsv4::ref
