// ops/reference: interleaved (GPT-J) RoPE on the last rope_dim dims of a vector (spec §2.0 RoPE), with
// the two bases and YaRN for compressed layers. Angles and rotation in fp32, results rounded to bf16.
#pragma once

#include <cstdint>
#include <vector>

namespace dsv4::ref {

struct RopeParams {
  int64_t rope_dim = 64;
  double base = 10000.0;
  bool yarn = false;              // spec §2.0: every layer with compress_ratio > 0
  int64_t original_seq_len = 0;   // YaRN: 65536
  double factor = 1.0;            // YaRN: 16
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// spec §2.0: low = max(0, floor(c(beta_fast))), high = min(rope_dim−1, ceil(c(beta_slow))),
// c(n) = rope_dim·ln(original/(2πn)) / (2·ln base).
void yarn_correction_range(const RopeParams& p, int64_t* low, int64_t* high);

// The fp32 frequencies f_i, i < rope_dim/2, computed as the reference does (fp32 arithmetic).
std::vector<float> rope_frequencies(const RopeParams& p);

// Rotates the complex pairs (x[2i], x[2i+1]) of x[rope_dim] by angle fp32(pos)·f_i (inverse: by −angle)
// in place; the result is rounded to bf16.
void apply_rope(float* x, int64_t rope_dim, const float* freqs, int64_t pos, bool inverse);

// The same in two steps, for many vectors at one position (a token's 64 query heads, and their outputs'
// de-rotation): rope_cos_sin computes each pair's cos and sin once — cs[2i], cs[2i+1], the values
// apply_rope uses — and apply_rope_cs rotates with them, giving apply_rope's bits.
void rope_cos_sin(int64_t rope_dim, const float* freqs, int64_t pos, float* cs);
void apply_rope_cs(float* x, int64_t rope_dim, const float* cs, bool inverse);

}  // namespace dsv4::ref
