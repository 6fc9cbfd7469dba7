// unit: the sampling chain, stop strings and the speculative acceptance rule against hand-computed
// distributions and a chi-square test of the output distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>

#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "runtime/stop_matcher.h"

namespace dsv4 {
namespace {

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

std::vector<float> dist(const SamplingParams& sp, const std::vector<float>& logits, const TokenHistory& h = {}) {
  std::vector<float> p;
  sampling_distribution(sp, h, logits, &p);
  return p;
}

TEST(RuntimeSampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  const auto p = dist(sp, {0.5f, 2.0f, 1.0f, 2.0f});
  EXPECT_EQ(p, (std::vector<float>{0, 1, 0, 0}));
  EXPECT_EQ(argmax(std::vector<float>{3, 3, 1}), 0);
}

TEST(RuntimeSampler, TemperatureMatchesHandSoftmax) {
  SamplingParams sp;
  sp.temperature = 0.5f;
  const auto p = dist(sp, {1.0f, 2.0f, 3.0f});
  const double z = std::exp(2.0) + std::exp(4.0) + std::exp(6.0);
  EXPECT_NEAR(p[0], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(p[1], std::exp(4.0) / z, 1e-6);
  EXPECT_NEAR(p[2], std::exp(6.0) / z, 1e-6);
}

TEST(RuntimeSampler, TopKTopPMinP) {
  const auto l = logits_of({0.05, 0.5, 0.15, 0.3});
  SamplingParams sp;
  sp.top_k = 2;  // keeps 0.5 and 0.3
  auto p = dist(sp, l);
  EXPECT_NEAR(p[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(p[3], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_EQ(p[2], 0.0f);
  sp = {};
  sp.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8: the two largest
  p = dist(sp, l);
  EXPECT_NEAR(p[1], 0.625, 1e-6);
  EXPECT_NEAR(p[3], 0.375, 1e-6);
  sp.top_p = 0.85f;  // needs the third (0.95)
  p = dist(sp, l);
  EXPECT_NEAR(p[2], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(p[0], 0.0f);
  sp = {};
  sp.min_p = 0.2f;  // floor 0.1: drops 0.05 only
  p = dist(sp, l);
  EXPECT_EQ(p[0], 0.0f);
  EXPECT_NEAR(p[2], 0.15 / 0.95, 1e-6);
  EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-6);
}

// Plain reference of the chain: full sort, softmax, cut by top-k, then top-p, then min-p.
std::vector<double> reference_chain(const SamplingParams& sp, const std::vector<float>& l) {
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  size_t kept = sp.top_k > 0 ? std::min(l.size(), static_cast<size_t>(sp.top_k)) : l.size();
  std::vector<double> w(kept);
  double sum = 0.0;
  for (size_t i = 0; i < kept; ++i) sum += (w[i] = std::exp((l[order[i]] - l[order[0]]) / sp.temperature));
  double cum = 0.0;
  size_t keep = 0;
  while (keep < kept && sp.top_p < 1.0f) {
    cum += w[keep++] / sum;
    if (cum >= sp.top_p) break;
  }
  if (sp.top_p < 1.0f) kept = std::max<size_t>(keep, 1);
  size_t m = 1;
  while (m < kept && w[m] >= sp.min_p * w[0]) ++m;
  kept = m;
  std::vector<double> out(l.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < kept; ++i) total += w[i];
  for (size_t i = 0; i < kept; ++i) out[order[i]] = w[i] / total;
  return out;
}

TEST(RuntimeSampler, ChainMatchesFullSortReferenceOnALargeVocab) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.0f, 3.0f);
  for (int trial = 0; trial < 24; ++trial) {
    std::vector<float> l(20000);
    for (float& x : l) x = std::round(n(rng) * 8.0f) / 8.0f;  // coarse values: many ties
    SamplingParams sp;
    sp.temperature = 0.3f + 0.1f * static_cast<float>(trial % 10);
    sp.top_k = trial % 3 == 0 ? 0 : 50 * (trial % 7 + 1);
    sp.top_p = trial % 4 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(trial % 5);
    sp.min_p = trial % 5 == 0 ? 0.0f : 0.01f * static_cast<float>(trial % 6);
    const auto got = dist(sp, l);
    const auto want = reference_chain(sp, l);
    for (size_t i = 0; i < l.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6) << "trial " << trial << " id " << i;
  }
}

TEST(RuntimeSampler, Penalties) {
  TokenHistory h;
  h.add_prompt(std::vector<int32_t>{0, 1});
  h.add_output(2);
  h.add_output(2);
  h.add_output(3);
  SamplingParams sp;
  sp.repetition_penalty = 2.0f;
  sp.frequency_penalty = 0.5f;
  sp.presence_penalty = 0.25f;
  std::vector<float> l = {4.0f, -1.0f, 3.0f, 1.0f, 5.0f};
  apply_penalties(sp, h, l);
  EXPECT_FLOAT_EQ(l[0], 2.0f);                 // prompt, positive: divided
  EXPECT_FLOAT_EQ(l[1], -2.0f);                // prompt, negative: multiplied
  EXPECT_FLOAT_EQ(l[2], 1.5f - 1.0f - 0.25f);  // output x2: 3/2, then frequency 2*0.5, presence
  EXPECT_FLOAT_EQ(l[3], 0.5f - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(l[4], 5.0f);                 // unseen
  h.remove_output(2);
  EXPECT_EQ(h.output_count(2), 1);
}

TEST(RuntimeSampler, InverseCdfAndCounterRng) {
  const std::vector<float> p = {0.0f, 0.25f, 0.0f, 0.75f};
  EXPECT_EQ(sample_from(p, 0.0), 1);
  EXPECT_EQ(sample_from(p, 0.2499), 1);
  EXPECT_EQ(sample_from(p, 0.25), 3);
  EXPECT_EQ(sample_from(p, 0.9999999), 3);
  EXPECT_EQ(uniform_draw(7, 3, 0), uniform_draw(7, 3, 0));
  EXPECT_NE(uniform_draw(7, 3, 0), uniform_draw(7, 3, 1));
  EXPECT_NE(uniform_draw(7, 3, 0), uniform_draw(8, 3, 0));
  double sum = 0.0;
  for (int i = 0; i < 20000; ++i) {
    const double u = uniform_draw(42, i, 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 20000.0, 0.5, 0.01);
}

TEST(RuntimeSampler, Logprobs) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 3.0f};
  const double lz = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
  compute_logprobs(l, 2, 3, &chosen, &top);
  EXPECT_EQ(chosen.token, 2);
  EXPECT_NEAR(chosen.logprob, 2.0 - lz, 1e-5);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].token, 1);  // tie with 3: lower id first
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 2);
  EXPECT_NEAR(top[0].logprob, 3.0 - lz, 1e-5);
}

TEST(RuntimeStopMatcher, MatchesAcrossTokensAndHoldsBackPrefixes) {
  StopMatcher m({"STOP", "\n\n"});
  bool stopped = false;
  EXPECT_EQ(m.push("hello S", &stopped), "hello ");  // "S" may begin "STOP": held back
  EXPECT_FALSE(stopped);
  EXPECT_EQ(m.push("T", &stopped), "");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(m.push("OP and more", &stopped), "");  // the stop string and what follows are dropped
  EXPECT_TRUE(stopped);
  StopMatcher n({"xyz", "\n\n"});
  EXPECT_EQ(n.push("abcxy", &stopped), "abc");
  EXPECT_EQ(n.push("q\n", &stopped), "xyq");  // "xyq" can no longer match; "\n" still might
  EXPECT_EQ(n.push("a\n", &stopped), "\na");
  EXPECT_EQ(n.flush(), "\n");
  StopMatcher split({"\xC3\xA9!"});  // a cut never splits a UTF-8 character
  EXPECT_EQ(split.push("x\xC3\xA9", &stopped), "x");
  EXPECT_EQ(split.push("?", &stopped), "\xC3\xA9?");
  StopMatcher none({});
  EXPECT_EQ(none.push("anything", &stopped), "anything");
}

// p and q on a small vocabulary; x ~ q, then accept_draft. The output must be distributed as p.
double chi_square_of_accept(bool naive) {
  const std::vector<float> p = {0.05f, 0.30f, 0.10f, 0.25f, 0.20f, 0.10f};
  const std::vector<float> q = {0.30f, 0.10f, 0.20f, 0.05f, 0.15f, 0.20f};
  SamplingParams sp;
  sp.temperature = 1.0f;
  constexpr int kTrials = 40000;
  std::vector<int> counts(p.size(), 0);
  for (int i = 0; i < kTrials; ++i) {
    const int32_t x = sample_from(q, uniform_draw(1234, i, 1));
    const AcceptDecision d =
        naive ? AcceptDecision{true, x} : accept_draft(sp, p, q, x, uniform_draw(1234, i, 2), uniform_draw(1234, i, 3));
    ++counts[static_cast<size_t>(d.token)];
  }
  double chi2 = 0.0;
  for (size_t v = 0; v < p.size(); ++v) {
    const double e = kTrials * p[v];
    chi2 += (counts[v] - e) * (counts[v] - e) / e;
  }
  return chi2;
}

TEST(RuntimeSpeculative, RejectionSamplingPreservesTheTargetDistribution) {
  // 5 degrees of freedom: P(chi2 > 20.5) = 0.001. The seeds are fixed, so the test is deterministic.
  EXPECT_LT(chi_square_of_accept(false), 20.5);
  // Negative control: accepting every draft reproduces q, which the same test rejects.
  EXPECT_GT(chi_square_of_accept(true), 1000.0);
}

TEST(RuntimeSpeculative, GreedyAcceptsExactlyTheArgmax) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  const std::vector<float> p = {0, 0, 1, 0};
  const std::vector<float> q = {0, 1, 0, 0};
  EXPECT_EQ(accept_draft(sp, p, q, 2, 0.99, 0.5).accepted, true);
  const AcceptDecision d = accept_draft(sp, p, q, 1, 0.0, 0.5);
  EXPECT_FALSE(d.accepted);
  EXPECT_EQ(d.token, 2);
  SpecStats st;
  st.record(0, true);
  st.record(0, false);
  st.record(1, true);
  EXPECT_EQ(st.proposed, (std::vector<int64_t>{2, 1}));
  EXPECT_DOUBLE_EQ(st.acceptance(), 2.0 / 3.0);
}

}  // namespace
}  // namespace dsv4
