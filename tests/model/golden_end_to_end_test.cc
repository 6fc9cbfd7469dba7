// tests/model: end to end against every golden case (prefill, prefill(37)+decode, chunked prefill, MTP;
// golden/README.md "gross breakage" floors), the engine's own self-consistency (decode and chunked
// prefill vs its one-shot prefill) and the exact indexer tie rule.
#include <gtest/gtest.h>

#include <cstdio>

#include "golden_case.h"
#include "golden_metrics.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

constexpr double kE2eTop1 = 0.70, kE2eMeanAbs = 0.25;  // README thresholds (gross breakage only)
constexpr int64_t kDecodePrefill = 37;                 // decode_logits row 0 = position 36
// With AMX, a routed expert that gets >= 16 prefill tokens sums on bf16 tiles in another order than it
// does at decode (dense projections use AMX at every count, one order), so by design a prefill's busy
// experts may differ from decode's in the last bits, and in a tiny random model such a difference can flip
// an indexer or routing choice for a few rows. On the shipped tiny case the AMX variant measured exact
// (decode and chunks 1/7/64 against prefill max|dlogit| 0, and a 300-token prefill identical with routed
// experts on AMX from 1, 16 or never: its k = 256 sums come out exact in any order), but the acceptance
// cases are other checkpoints with longer sums, so the bound stays what the design promises, not what
// this sample happens to give. Batch invariance itself is asserted exactly (CpuBackend.BatchInvariant*).
constexpr double kAmxSelfTop1 = 0.95;

// Decode / chunked prefill against the engine's own one-shot prefill.
template <typename Stats>
void expect_self_consistent(const CaseData& cd, const Stats& self) {
  if (cd.variant.exact_self) {
    EXPECT_EQ(self.max_abs, 0.0) << cd.label << ": decode and chunks must reproduce prefill bit for bit";
  } else {
    EXPECT_GE(self.top1, kAmxSelfTop1) << cd.label;
  }
}

class GoldenEndToEnd : public ::testing::TestWithParam<EngineVariant> {
 protected:
  void SetUp() override {
    cases_ = golden_cases();
    ASSERT_FALSE(cases_.empty());
  }
  std::vector<GoldenCase> cases_;
};

TEST_P(GoldenEndToEnd, Prefill) {
  for (const auto& gc : cases_) {
    CaseData& cd = CaseData::get(gc, GetParam());
    ASSERT_TRUE(cd.model);
    const auto n = static_cast<int64_t>(cd.tokens.size());
    const auto s = compare_logits(cd.prefill().logits, cd.golden_f32("prefill_logits"), cd.vocab, n);
    std::printf("[golden %s] e2e prefill: top-1 %.2f%% mean|dlogit| %.3g\n", cd.label.c_str(), 100 * s.top1, s.mean_abs);
    EXPECT_GE(s.top1, kE2eTop1);
    EXPECT_LE(s.mean_abs, kE2eMeanAbs);
  }
}

TEST_P(GoldenEndToEnd, PrefillThenDecode) {
  for (const auto& gc : cases_) {
    CaseData& cd = CaseData::get(gc, GetParam());
    ASSERT_TRUE(cd.model);
    const auto n = static_cast<int64_t>(cd.tokens.size());
    const auto& run = cd.run(kDecodePrefill, kDecodePrefill);
    ASSERT_EQ(run.logits.size(), static_cast<size_t>(n * cd.vocab));
    // Our rows 36.. against decode_logits rows 0..
    std::vector<float> ours(run.logits.begin() + (kDecodePrefill - 1) * cd.vocab, run.logits.end());
    const int64_t rows = n - kDecodePrefill + 1;
    const auto s = compare_logits(ours, cd.golden_f32("decode_logits"), cd.vocab, rows);
    std::printf("[golden %s] e2e prefill(37)+decode: top-1 %.2f%% mean|dlogit| %.3g\n", cd.label.c_str(), 100 * s.top1, s.mean_abs);
    EXPECT_GE(s.top1, kE2eTop1);
    EXPECT_LE(s.mean_abs, kE2eMeanAbs);
    const auto self = compare_logits(run.logits, cd.prefill().logits, cd.vocab, n);
    std::printf("[golden %s] self: prefill(37)+decode vs own prefill: top-1 %.2f%% max|dlogit| %.3g\n", cd.label.c_str(),
                100 * self.top1, self.max_abs);
    expect_self_consistent(cd, self);
  }
}

TEST_P(GoldenEndToEnd, ChunkedPrefill) {
  for (const auto& gc : cases_) {
    CaseData& cd = CaseData::get(gc, GetParam());
    ASSERT_TRUE(cd.model);
    const auto n = static_cast<int64_t>(cd.tokens.size());
    const auto golden = cd.golden_f32("prefill_logits");
    for (int64_t chunk : {1, 7, 64}) {
      const auto& run = cd.run(n, chunk);
      const auto s = compare_logits(run.logits, golden, cd.vocab, n);
      const auto self = compare_logits(run.logits, cd.prefill().logits, cd.vocab, n);
      std::printf("[golden %s] e2e chunk %lld: top-1 %.2f%% mean|dlogit| %.3g | vs own prefill: top-1 %.2f%% max|dlogit| %.3g\n",
                  cd.label.c_str(), static_cast<long long>(chunk), 100 * s.top1, s.mean_abs, 100 * self.top1, self.max_abs);
      EXPECT_GE(s.top1, kE2eTop1) << "chunk " << chunk;
      EXPECT_LE(s.mean_abs, kE2eMeanAbs) << "chunk " << chunk;
      expect_self_consistent(cd, self);
    }
  }
}

TEST_P(GoldenEndToEnd, Mtp) {
  for (const auto& gc : cases_) {
    CaseData& cd = CaseData::get(gc, GetParam());
    ASSERT_TRUE(cd.model);
    const auto n = static_cast<int64_t>(cd.tokens.size());
    const auto& c = cd.model->config();
    const auto& pre = cd.prefill();
    auto seq = cd.model->new_sequence();
    SequenceState* states[] = {seq.get()};
    std::vector<BatchToken> batch;
    for (int64_t i = 0; i + 1 < n; ++i) batch.push_back({0, static_cast<int32_t>(i), cd.tokens[static_cast<size_t>(i + 1)], true});
    std::vector<float> mtp;
    const Status st = cd.model->forward_mtp(
        batch, std::span<const float>(pre.streams.data(), static_cast<size_t>((n - 1) * c.hc_mult * c.dim)), states, &mtp);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    const auto s = compare_logits(mtp, cd.golden_f32("mtp_prefill_logits"), cd.vocab, n - 1);
    std::printf("[golden %s] e2e MTP: top-1 %.2f%% mean|dlogit| %.3g\n", cd.label.c_str(), 100 * s.top1, s.mean_abs);
    EXPECT_GE(s.top1, kE2eTop1);
    EXPECT_LE(s.mean_abs, kE2eMeanAbs);
  }
}

// Wherever the k-th and (k+1)-th indexer scores tie, the lower entry id must be the one selected; and no
// unselected entry may outscore a selected one.
TEST_P(GoldenEndToEnd, IndexerTieRuleSelfCheck) {
  for (const auto& gc : cases_) {
    CaseData& cd = CaseData::get(gc, GetParam());
    ASSERT_TRUE(cd.model);
    const auto& trace = cd.prefill_trace();
    int64_t ties = 0, violations = 0, layers = 0;
    for (const auto& L : trace.layers) {
      if (L.indexer.width == 0) continue;
      ++layers;
      for (size_t i = 0; i < L.indexer.scores.size(); ++i) {
        const auto& sc = L.indexer.scores[i];
        // Causal visibility (spec §2.6 step 7): query i scores exactly the entries t < ⌊(i+1)/4⌋ and
        // keeps min(index_topk, that many); the rest of the row is −1.
        const auto visible = static_cast<int64_t>(i + 1) / 4;
        EXPECT_EQ(static_cast<int64_t>(sc.size()), visible);
        for (int64_t j = 0; j < L.indexer.width; ++j) {
          const int32_t id = L.indexer.ids[i * static_cast<size_t>(L.indexer.width) + static_cast<size_t>(j)];
          EXPECT_EQ(id >= 0, j < std::min<int64_t>(visible, cd.model->config().index_topk)) << "row " << i;
          EXPECT_LT(id, visible) << "row " << i;
        }
        std::vector<bool> chosen(sc.size(), false);
        for (int64_t j = 0; j < L.indexer.width; ++j) {
          const int32_t id = L.indexer.ids[i * static_cast<size_t>(L.indexer.width) + static_cast<size_t>(j)];
          if (id >= 0) chosen[static_cast<size_t>(id)] = true;
        }
        bool row_tie = false;
        for (size_t a = 0; a < sc.size(); ++a) {
          if (!chosen[a]) continue;
          for (size_t b = 0; b < sc.size(); ++b) {
            if (chosen[b]) continue;
            if (sc[b] > sc[a] || (sc[b] == sc[a] && b < a)) ++violations;
            if (sc[b] == sc[a]) row_tie = true;
          }
        }
        ties += row_tie;
      }
    }
    std::printf("[golden %s] tie rule: %lld CSA layers, %lld rows with a tie at the cut, %lld violations\n", cd.label.c_str(),
                static_cast<long long>(layers), static_cast<long long>(ties), static_cast<long long>(violations));
    EXPECT_EQ(violations, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GoldenEndToEnd, ::testing::ValuesIn(engine_variants()), variant_name);

}  // namespace
}  // namespace dsv4::test
