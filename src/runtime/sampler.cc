// runtime: the sampling chain (see sampler.h).
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace dsv4 {
namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

double uniform_draw(uint64_t seed, int64_t index, uint32_t draw) {
  const uint64_t h = mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(index)) ^ (uint64_t{draw} << 32 | 0x5a5aull));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

void TokenHistory::add_prompt(std::span<const int32_t> ids) {
  for (int32_t id : ids) ++prompt_[id];
}
void TokenHistory::add_output(int32_t id) { ++output_[id]; }
void TokenHistory::remove_output(int32_t id) {
  auto it = output_.find(id);
  DSV4_CHECK(it != output_.end(), "remove_output of a token never added");
  if (--it->second == 0) output_.erase(it);
}

bool is_greedy(const SamplingParams& p) { return p.temperature <= 0.0f; }

void apply_penalties(const SamplingParams& p, const TokenHistory& h, std::span<float> logits) {
  const auto n = static_cast<int32_t>(logits.size());
  auto in_vocab = [n](int32_t id) { return id >= 0 && id < n; };
  if (p.repetition_penalty != 1.0f) {
    auto penalize = [&](int32_t id) {
      float& l = logits[static_cast<size_t>(id)];
      l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    };
    for (const auto& [id, c] : h.prompt_counts()) {
      if (in_vocab(id)) penalize(id);
    }
    for (const auto& [id, c] : h.output_counts()) {
      if (in_vocab(id) && h.prompt_counts().count(id) == 0) penalize(id);
    }
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [id, c] : h.output_counts()) {
      if (!in_vocab(id)) continue;
      logits[static_cast<size_t>(id)] -= p.frequency_penalty * static_cast<float>(c) + p.presence_penalty;
    }
  }
}

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > values[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  }
  return best;
}

void sampling_distribution(const SamplingParams& p, const TokenHistory& h, std::span<const float> logits,
                           std::vector<float>* probs) {
  const size_t n = logits.size();
  std::vector<float> l(logits.begin(), logits.end());
  apply_penalties(p, h, l);
  probs->assign(n, 0.0f);
  if (is_greedy(p)) {
    (*probs)[static_cast<size_t>(argmax(l))] = 1.0f;
    return;
  }
  // Candidates in the order top-k and top-p cut: logit descending, lower id first on ties. Selection
  // (nth_element) finds the cuts in linear time; nothing is fully sorted, which at a 129k vocabulary
  // would cost more than the rest of the step.
  struct Cand {
    float logit;
    int32_t id;
    double w;
  };
  auto before = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  std::vector<Cand> cand(n);
  for (size_t i = 0; i < n; ++i) cand[i] = {l[i], static_cast<int32_t>(i), 0.0};
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), before);
    cand.resize(static_cast<size_t>(p.top_k));
  }
  // Softmax at temperature over the candidates, in double so the cut points are stable.
  const double inv_t = 1.0 / static_cast<double>(p.temperature);
  float top = cand[0].logit;
  for (const Cand& c : cand) top = std::max(top, c.logit);
  double sum = 0.0;
  for (Cand& c : cand) sum += (c.w = std::exp((static_cast<double>(c.logit) - top) * inv_t));
  if (p.top_p < 1.0f) {
    // The shortest prefix (in candidate order) holding top_p of the mass, by quickselect on the mass:
    // [0, lo) is known to be kept whole; the cut lies in [lo, hi).
    double need = static_cast<double>(p.top_p) * sum;
    size_t lo = 0, hi = cand.size(), end = 0;
    bool found = false;
    while (lo < hi && !found) {
      const size_t mid = lo + (hi - lo) / 2;
      std::nth_element(cand.begin() + static_cast<ptrdiff_t>(lo), cand.begin() + static_cast<ptrdiff_t>(mid),
                       cand.begin() + static_cast<ptrdiff_t>(hi), before);
      double upper = 0.0;
      for (size_t i = lo; i < mid; ++i) upper += cand[i].w;
      if (upper >= need) {
        hi = mid;
      } else if (upper + cand[mid].w >= need) {
        end = mid + 1;
        found = true;
      } else {
        need -= upper + cand[mid].w;
        lo = mid + 1;
      }
    }
    // Not found: rounding left `need` unmet inside [lo, hi); everything before hi is kept.
    if (!found) end = hi;
    cand.resize(std::max<size_t>(end, 1));
  }
  if (p.min_p > 0.0f) {
    // The most likely candidate has weight exp(0) = 1; keep w >= min_p of it.
    const double floor = static_cast<double>(p.min_p);
    std::erase_if(cand, [&](const Cand& c) { return c.w < floor; });
  }
  double total = 0.0;
  for (const Cand& c : cand) total += c.w;
  for (const Cand& c : cand) (*probs)[static_cast<size_t>(c.id)] = static_cast<float>(c.w / total);
}

int32_t sample_from(std::span<const float> probs, double u) {
  double total = 0.0;
  for (float x : probs) total += x;
  const double target = u * total;
  double cum = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    last_nonzero = static_cast<int32_t>(i);
    cum += probs[i];
    if (target < cum) return static_cast<int32_t>(i);
  }
  return last_nonzero;  // u*total rounded past the last bucket
}

void compute_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n, TokenLogprob* chosen_out,
                      std::vector<TokenLogprob>* top_out) {
  double mx = -std::numeric_limits<double>::infinity();
  for (float x : logits) mx = std::max(mx, static_cast<double>(x));
  double sum = 0.0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  const double log_z = mx + std::log(sum);
  auto lp = [&](int32_t id) { return static_cast<float>(static_cast<double>(logits[static_cast<size_t>(id)]) - log_z); };
  *chosen_out = {chosen, lp(chosen)};
  top_out->clear();
  if (top_n <= 0) return;
  const size_t k = std::min(static_cast<size_t>(top_n), logits.size());
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k), order.end(), [&](int32_t a, int32_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (size_t i = 0; i < k; ++i) top_out->push_back({order[i], lp(order[i])});
}

}  // namespace dsv4
