// tests/model: the forward API contract — batch invariance across sequences, bad input rejected as a
// Status without touching state, strict loader errors — and the streaming compressor's block boundaries.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <fstream>
#include <random>

#include "core/formats.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/compressor.h"
#include "model/model.h"
#include "ops/reference/rope.h"
#include "test_util.h"

namespace dsv4 {
namespace {

std::filesystem::path tiny_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

Model& tiny_model() {
  static std::unique_ptr<Model> m = [] {
    auto r = Model::load(tiny_dir());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? std::move(r).value() : nullptr;
  }();
  return *m;
}

std::vector<float> run_alone(Model& m, const std::vector<int32_t>& ids) {
  auto s = m.new_sequence();
  SequenceState* st[] = {s.get()};
  std::vector<BatchToken> b;
  for (size_t i = 0; i < ids.size(); ++i) b.push_back({0, static_cast<int32_t>(i), ids[i], true});
  std::vector<float> logits;
  EXPECT_TRUE(m.forward(b, st, &logits).is_ok());
  return logits;
}

TEST(ModelApi, BatchOfInterleavedSequencesEqualsEachAlone) {
  Model& m = tiny_model();
  const int64_t V = m.config().vocab_size;
  std::vector<int32_t> a, b;
  for (int i = 0; i < 40; ++i) a.push_back(i == 0 ? 0 : (i * 37 + 11) % 1000 + 2);
  for (int i = 0; i < 23; ++i) b.push_back(i == 0 ? 0 : (i * 91 + 5) % 1000 + 2);
  const auto la = run_alone(m, a), lb = run_alone(m, b);
  // One batch: b's tokens interleaved with a's, b listed as sequence 0 and a as sequence 1; only some rows
  // want logits.
  auto sa = m.new_sequence(), sb = m.new_sequence();
  SequenceState* st[] = {sb.get(), sa.get()};
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < a.size(); ++i) {
    batch.push_back({1, static_cast<int32_t>(i), a[i], i % 3 == 0});
    if (i < b.size()) batch.push_back({0, static_cast<int32_t>(i), b[i], true});
  }
  std::vector<float> logits;
  ASSERT_TRUE(m.forward(batch, st, &logits).is_ok());
  size_t row = 0;
  for (const auto& t : batch) {
    if (!t.want_logits) continue;
    const auto& ref = t.seq == 1 ? la : lb;
    ASSERT_TRUE(std::equal(logits.begin() + static_cast<std::ptrdiff_t>(row * V), logits.begin() + static_cast<std::ptrdiff_t>((row + 1) * V),
                           ref.begin() + static_cast<std::ptrdiff_t>(t.pos * V)))
        << "seq " << t.seq << " pos " << t.pos;
    ++row;
  }
  EXPECT_EQ(sa->n_tokens(), 40);
  EXPECT_EQ(sb->n_tokens(), 23);
}

TEST(ModelApi, BadInputIsAStatusAndLeavesStateAlone) {
  Model& m = tiny_model();
  auto s = m.new_sequence();
  SequenceState* st[] = {s.get()};
  std::vector<float> logits;
  std::vector<BatchToken> ok = {{0, 0, 0, true}, {0, 1, 5, true}};
  ASSERT_TRUE(m.forward(ok, st, &logits).is_ok());
  auto expect_rule = [&](std::vector<BatchToken> b, const char* rule) {
    const Status r = m.forward(b, st, &logits);
    EXPECT_FALSE(r.is_ok());
    EXPECT_EQ(r.rule(), rule) << r.to_string();
    EXPECT_EQ(s->n_tokens(), 2);
  };
  expect_rule({{0, 2, 7, true}, {0, 3, 1024, true}}, "model.token_range");
  expect_rule({{0, 2, 7, true}, {0, 3, -1, true}}, "model.token_range");
  expect_rule({{0, 3, 7, true}}, "model.position_gap");
  expect_rule({{0, 2, 7, true}, {0, 2, 7, true}}, "model.position_gap");
  expect_rule({{1, 0, 7, true}}, "model.batch_seq");
  SequenceState* twice[] = {s.get(), s.get()};
  EXPECT_EQ(m.forward(std::vector<BatchToken>{{0, 2, 7, true}}, twice, &logits).rule(), "model.batch_state_alias");
  // Context limit: pretend the sequence is full (filling 1024 positions would only slow the test down).
  auto full = m.new_sequence();
  full->n_tokens_ = m.max_context();
  SequenceState* fs[] = {full.get()};
  const Status r = m.forward(std::vector<BatchToken>{{0, static_cast<int32_t>(m.max_context()), 7, true}}, fs, &logits);
  EXPECT_EQ(r.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(r.rule(), "model.context_length");
  // MTP: streams of the wrong size.
  std::vector<float> streams(10);
  EXPECT_EQ(m.forward_mtp(std::vector<BatchToken>{{0, 0, 5, true}}, streams, st, &logits).rule(), "model.mtp_streams");
}

// Rewrites the tiny checkpoint with one tensor changed and checks the loader's error.
class LoaderRejects : public ::testing::Test {
 protected:
  Status load_with(const std::function<void(std::vector<TensorToWrite>&)>& edit) {
    auto ck = Checkpoint::open(tiny_dir());
    EXPECT_TRUE(ck.is_ok());
    std::vector<TensorToWrite> ts;
    for (const auto& t : ck->tensors()) {
      TensorToWrite w{t.name, t.dtype, t.shape, {}};
      w.bytes.assign(t.data.begin(), t.data.end());
      ts.push_back(std::move(w));
    }
    edit(ts);
    EXPECT_TRUE(write_sharded_checkpoint(dir_.path(), ts, 1).is_ok());
    std::filesystem::copy_file(tiny_dir() / "config.json", dir_ / "config.json");
    std::filesystem::create_directories(dir_ / "inference");
    std::filesystem::copy_file(tiny_dir() / "inference/config.json", dir_ / "inference/config.json");
    auto m = Model::load(dir_.path());
    return m.status();
  }
  static TensorToWrite* find(std::vector<TensorToWrite>& ts, const std::string& name) {
    for (auto& t : ts)
      if (t.name == name) return &t;
    return nullptr;
  }
  test::TempDir dir_;
};

TEST_F(LoaderRejects, MissingTensor) {
  const Status s = load_with([](auto& ts) {
    std::erase_if(ts, [](const TensorToWrite& t) { return t.name == "layers.1.attn.indexer.wq_b.scale"; });
  });
  EXPECT_EQ(s.rule(), "checkpoint.layout") << s.to_string();
  EXPECT_NE(s.message().find("layers.1.attn.indexer.wq_b.scale"), std::string::npos);
}

TEST_F(LoaderRejects, WrongShape) {
  const Status s = load_with([](auto& ts) {
    auto* t = find(ts, "layers.0.attn_norm.weight");  // BF16 [256] → [128]
    t->shape = {128};
    t->bytes.resize(256);
  });
  EXPECT_EQ(s.rule(), "checkpoint.layout") << s.to_string();
}

TEST_F(LoaderRejects, WrongDtype) {
  const Status s = load_with([](auto& ts) {
    auto* t = find(ts, "layers.2.attn.wq_a.scale");  // E8M0 scale stored as I8
    t->dtype = DType::kI8;
  });
  EXPECT_EQ(s.rule(), "checkpoint.layout") << s.to_string();
}

TEST_F(LoaderRejects, HashTableOutsideExpertRange) {
  const Status s = load_with([](auto& ts) {
    auto* t = find(ts, "layers.0.ffn.gate.tid2eid");
    const int64_t bad = 8;  // 8 experts: ids 0..7
    std::memcpy(t->bytes.data() + 16, &bad, 8);
  });
  EXPECT_EQ(s.rule(), "model.tid2eid_range") << s.to_string();
}

// Synthetic compressor: streaming in any chunking gives the same entries, entries appear exactly at block
// ends, and entry b depends on blocks b−1 and b (overlap, r=4) or on block b only (non-overlap).
struct SyntheticCompressor {
  CompressorWeights w;
  std::vector<float> freqs;
  SyntheticCompressor(int64_t ratio, int64_t dim, int64_t dc, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 0.3f);
    w.ratio = ratio, w.head_dim = dc, w.overlap = ratio == 4;
    const int64_t width = (w.overlap ? 2 : 1) * dc;
    for (LinearWeight* lw : {&w.wkv, &w.wgate}) {
      lw->params = {dim, width, ref::ActQuant::kNone, ref::OutRound::kF32};
      lw->w.resize(static_cast<size_t>(dim * width));
      for (float& v : lw->w) v = d(rng);
    }
    w.ape.resize(static_cast<size_t>(ratio * width));
    for (float& v : w.ape) v = d(rng);
    w.norm.assign(static_cast<size_t>(dc), 1.0f);
    freqs = ref::rope_frequencies({64, 160000.0, true, 65536, 16.0, 32.0, 1.0});
  }
  std::vector<float> run(const std::vector<float>& x, int64_t dim, int64_t chunk) {
    CompressorState st;
    v4::compressor_init(w, v4::CompressorKind::kMain, nullptr, &st);
    const int64_t n = static_cast<int64_t>(x.size()) / dim;
    for (int64_t s = 0; s < n; s += chunk)
      v4::compressor_feed(v4::Execution{}, w, v4::CompressorKind::kMain, 64, 1e-6f, freqs, &st, x.data() + s * dim, s, std::min(chunk, n - s));
    EXPECT_EQ(st.n_entries, n / w.ratio);
    EXPECT_EQ(st.rows.size(), st.n_entries);
    std::vector<float> entries(static_cast<size_t>(st.n_entries * w.head_dim));  // [n_entries, dc]
    for (int64_t t = 0; t < st.n_entries; ++t) st.rows.read(t, entries.data() + t * w.head_dim);
    // Only the open block's partial rows (and the previous block's with overlap) are still held.
    EXPECT_LE(st.partial.size() - st.partial.first_row(), (w.overlap ? 2 : 1) * w.ratio);
    return entries;
  }
};

TEST(StreamingCompressor, BlockBoundariesAndChunking) {
  const int64_t dim = 16, dc = 128, n = 23;
  for (int64_t ratio : {4, 8}) {
    SyntheticCompressor c(ratio, dim, dc, 5);
    std::mt19937 rng(9);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * dim));
    for (float& v : x) v = round_bf16(d(rng));
    const auto whole = c.run(x, dim, n);
    for (int64_t chunk : {1, 3, 5}) EXPECT_EQ(c.run(x, dim, chunk), whole) << "ratio " << ratio << " chunk " << chunk;
    // Perturb one token of block 1 and see which entries move.
    auto x2 = x;
    x2[static_cast<size_t>((ratio + 1) * dim)] += 1.0f;
    const auto moved = c.run(x2, dim, n);
    const int64_t n_entries = n / ratio;
    for (int64_t b = 0; b < n_entries; ++b) {
      const bool same = std::equal(moved.begin() + b * dc, moved.begin() + (b + 1) * dc, whole.begin() + b * dc);
      const bool should_move = b == 1 || (ratio == 4 && b == 2);  // overlap: block 1 also feeds entry 2
      EXPECT_EQ(same, !should_move) << "ratio " << ratio << " entry " << b;
    }
  }
}

}  // namespace
}  // namespace dsv4
