// tests/model: module-level teacher forcing against every golden case (golden/README.md thresholds
// table): each module runs on the reference's inputs and is compared with the reference's outputs.
// The measured figures are printed so every threshold row can be reported.
#include <gtest/gtest.h>

#include <cstdio>

#include "golden_case.h"
#include "golden_metrics.h"
#include "test_util.h"

namespace dsv4::test {
namespace {

std::string lname(int64_t il, const char* what) { return "L" + std::to_string(il) + "_" + what; }

class GoldenTeacher : public ::testing::TestWithParam<EngineVariant> {
 protected:
  // Every golden case, loaded for this test's engine variant (a load failure fails the test here).
  void SetUp() override {
    const std::vector<GoldenCase> cases = golden_cases();
    ASSERT_FALSE(cases.empty()) << "no golden cases under " << (shared_dir() / "golden");
    for (const auto& gc : cases) {
      CaseData& cd = CaseData::get(gc, GetParam());
      ASSERT_TRUE(cd.model) << cd.label;
      cases_.push_back(&cd);
    }
  }
  // Calls fn(case, il, the teacher-forced outputs of layer il) for every layer of every case.
  template <typename Fn>
  void for_each_layer(Fn fn) {
    for (CaseData* cd : cases_) {
      const v4::TeacherResult& t = cd->teacher();
      for (int64_t il = 0; il < cd->model->config().n_layers; ++il) fn(*cd, il, t.layers[static_cast<size_t>(il)]);
    }
  }
  std::vector<CaseData*> cases_;
};

TEST_P(GoldenTeacher, HcPreCombPostAndY) {
  for_each_layer([](CaseData& cd, int64_t il, const v4::BlockTrace& L) {
    const auto& c = cd.model->config();
    struct Site { const char* name; const std::vector<float>* y; const std::vector<float>* post; const std::vector<float>* comb; };
    for (const Site& s : {Site{"attn", &L.hc_pre_attn_y, &L.hc_attn_post, &L.hc_attn_comb},
                          Site{"ffn", &L.hc_pre_ffn_y, &L.hc_ffn_post, &L.hc_ffn_comb}}) {
      const auto gy = cd.golden_f32(lname(il, (std::string("hc_pre_") + s.name + "_y").c_str()));
      const auto gp = cd.golden_f32(lname(il, (std::string("hc_") + s.name + "_post").c_str()));
      const auto gcmb = cd.golden_f32(lname(il, (std::string("hc_") + s.name + "_comb").c_str()));
      const double comb_rms = relative_rms(*s.comb, gcmb, c.hc_mult * c.hc_mult);
      const double comb_max = max_row_relative(*s.comb, gcmb, c.hc_mult * c.hc_mult);
      const double post_rms = relative_rms(*s.post, gp, c.hc_mult);
      const double post_max = max_row_relative(*s.post, gp, c.hc_mult);
      const double y_max = max_row_relative(*s.y, gy, c.dim);
      std::printf("[golden %s] L%lld hc_pre_%s: comb rel_rms %.3g max_rel %.3g | post rel_rms %.3g max_rel %.3g | y max_rel %.3g\n",
                  cd.label.c_str(), static_cast<long long>(il), s.name, comb_rms, comb_max, post_rms, post_max, y_max);
      EXPECT_LE(comb_rms, 1e-5);
      EXPECT_LE(comb_max, 1e-5);
      EXPECT_LE(post_rms, 1e-5);
      EXPECT_LE(post_max, 1e-5);
      EXPECT_LE(y_max, 4e-3);
    }
  });
}

TEST_P(GoldenTeacher, AttentionAndIndexer) {
  for_each_layer([](CaseData& cd, int64_t il, const v4::BlockTrace& L) {
    const auto& c = cd.model->config();
    const auto n = static_cast<int64_t>(cd.tokens.size());
    const auto g = cd.golden_f32(lname(il, "attn_out"));
    std::vector<bool> rows;
    double differ = 0;
    if (L.indexer.width > 0) {
      std::vector<int32_t> ours = L.indexer.ids;
      for (int32_t& v : ours) v = v < 0 ? -1 : static_cast<int32_t>(v + n);  // golden: n + entry id
      const auto gt = cd.golden_i32(lname(il, "indexer_topk"));
      ASSERT_EQ(gt.size(), ours.size()) << "indexer_topk shape, layer " << il;
      rows = rows_set_equal_mask(ours, gt, L.indexer.width);
      differ = rows_set_differ(ours, gt, L.indexer.width);
      EXPECT_LE(differ, 0.03) << "layer " << il;
    }
    const double rms = relative_rms(L.attn_out, g, c.dim, rows);
    const double mx = max_row_relative(L.attn_out, g, c.dim, rows);
    std::printf("[golden %s] L%lld attention (%s): rel_rms %.3g max_rel %.3g%s", cd.label.c_str(),
                static_cast<long long>(il), std::string(attention_kind_name(c.attention_kind(il))).c_str(), rms, mx,
                L.indexer.width > 0 ? "" : "\n");
    if (L.indexer.width > 0) std::printf(" | indexer top-k rows differing %.2f%%\n", 100 * differ);
    EXPECT_LE(rms, 0.012) << "layer " << il;
    EXPECT_LE(mx, 0.035) << "layer " << il;
  });
}

TEST_P(GoldenTeacher, MoeAndGate) {
  for_each_layer([](CaseData& cd, int64_t il, const v4::BlockTrace& L) {
    const auto& c = cd.model->config();
    const auto g = cd.golden_f32(lname(il, "moe_out"));
    const double rms = relative_rms(L.moe_out, g, c.dim);
    const double mx = max_row_relative(L.moe_out, g, c.dim);
    const double same = rows_identical(L.moe_out, g, c.dim);
    const double gate_diff = rows_set_differ(L.gate_indices, cd.golden_i32(lname(il, "gate_indices")), c.n_activated_experts);
    std::printf("[golden %s] L%lld moe: rel_rms %.3g max_rel %.3g bit-identical %.1f%% | gate sets differing %.2f%%\n",
                cd.label.c_str(), static_cast<long long>(il), rms, mx, 100 * same, 100 * gate_diff);
    EXPECT_LE(rms, 2e-3) << "layer " << il;
    EXPECT_LE(mx, 0.02) << "layer " << il;
    EXPECT_GE(same, 0.97) << "layer " << il;
    EXPECT_LE(gate_diff, 0.01) << "layer " << il;
  });
}

TEST_P(GoldenTeacher, BlockOutput) {
  for_each_layer([](CaseData& cd, int64_t il, const v4::BlockTrace& L) {
    const double rms = relative_rms(L.block_out, cd.golden_f32(lname(il, "block_out")), cd.model->config().dim);
    std::printf("[golden %s] L%lld block_out: rel_rms %.3g\n", cd.label.c_str(), static_cast<long long>(il), rms);
    EXPECT_LE(rms, 0.025) << "layer " << il;
  });
}

TEST_P(GoldenTeacher, HeadAndMtpOnGoldenStreams) {
  for (CaseData* cd : cases_) {
    const auto& t = cd->teacher();
    const auto n = static_cast<int64_t>(cd->tokens.size());
    const auto head = compare_logits(t.head_logits, cd->golden_f32("prefill_logits"), cd->vocab, n);
    std::printf("[golden %s] head on golden streams: top-1 %.2f%% max|dlogit| %.3g\n", cd->label.c_str(), 100 * head.top1, head.max_abs);
    EXPECT_EQ(head.top1, 1.0);
    EXPECT_LE(head.max_abs, 0.02);
    const auto mtp = compare_logits(t.mtp_logits, cd->golden_f32("mtp_prefill_logits"), cd->vocab, n - 1);
    std::printf("[golden %s] MTP on golden streams: mean|dlogit| %.3g top-1 %.2f%%\n", cd->label.c_str(), mtp.mean_abs, 100 * mtp.top1);
    EXPECT_LE(mtp.mean_abs, 0.01);
    EXPECT_GE(mtp.top1, 0.985);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, GoldenTeacher, ::testing::ValuesIn(engine_variants()), variant_name);

}  // namespace
}  // namespace dsv4::test
