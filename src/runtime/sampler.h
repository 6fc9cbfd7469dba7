// runtime: the sampling chain. logits -> penalties -> temperature -> top-k -> top-p -> min-p ->
// a distribution over the vocabulary -> one token drawn with the request's own counter-based RNG, so a
// request's draws never depend on what else shares the batch. Also log-probabilities for the API.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4 {

// Counter-based random numbers: draw `draw` for output index `index` of a request seeded `seed` is a
// pure function of the three, so batching, preemption and recompute never shift a request's stream.
double uniform_draw(uint64_t seed, int64_t index, uint32_t draw);

// The tokens a request has seen, for the penalties: repetition (HF-style, over prompt and output) and
// frequency/presence (OpenAI-style, over the output only).
class TokenHistory {
 public:
  void add_prompt(std::span<const int32_t> ids);
  void add_output(int32_t id);
  void remove_output(int32_t id);  // undoes add_output (speculative verification)
  bool seen(int32_t id) const { return prompt_.count(id) > 0 || output_.count(id) > 0; }
  int32_t output_count(int32_t id) const {
    auto it = output_.find(id);
    return it == output_.end() ? 0 : it->second;
  }
  const std::unordered_map<int32_t, int32_t>& output_counts() const { return output_; }
  const std::unordered_map<int32_t, int32_t>& prompt_counts() const { return prompt_; }

 private:
  std::unordered_map<int32_t, int32_t> prompt_;
  std::unordered_map<int32_t, int32_t> output_;
};

bool is_greedy(const SamplingParams& p);

// In place: repetition, frequency and presence penalties. [vocab]
void apply_penalties(const SamplingParams& p, const TokenHistory& h, std::span<float> logits);

// The full chain: `probs` becomes the distribution the request samples from ([vocab], zeros for
// filtered tokens, sums to 1). Greedy requests get a one-hot at the argmax (lowest id on ties).
void sampling_distribution(const SamplingParams& p, const TokenHistory& h, std::span<const float> logits,
                           std::vector<float>* probs);

// Argmax with the lowest id winning ties. [vocab]
int32_t argmax(std::span<const float> values);

// Inverse-CDF draw from `probs` with u in [0,1); skips zero-probability tokens.
int32_t sample_from(std::span<const float> probs, double u);

// Log-softmax of the raw model logits (before penalties and temperature, as the OpenAI API reports),
// for the chosen token and the `top_n` most likely ones (ties: lower id first).
void compute_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n, TokenLogprob* chosen_out,
                      std::vector<TokenLogprob>* top_out);

}  // namespace dsv4
