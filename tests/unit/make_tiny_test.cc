// unit: make-tiny against independent oracles — the golden checkpoint (tensor set, dtypes, shapes, config
// keys, value magnitudes), the quantization error bounds of E4M3 / E2M1 / BF16 decoded with formats.h,
// and byte-level determinism in the seed.
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "core/formats.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/cost_model.h"
#include "model/make_tiny.h"
#include "model/tensor_layout.h"
#include "test_util.h"

namespace dsv4 {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() { return test::shared_dir() / "golden/tiny/checkpoint"; }

ModelConfig golden_config() {
  auto cfg = load_model_config(golden_dir());
  EXPECT_TRUE(cfg.is_ok()) << cfg.status().to_string();
  return *cfg;
}

MakeTinyOptions test_options(uint64_t seed) {
  MakeTinyOptions o;
  o.seed = seed;
  o.tokenizer_dir = test::shared_dir() / "tokenizer";
  return o;
}

// One generated golden-config checkpoint shared by the read-only tests (13 MB, well under a second).
class MakeTinyGolden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto rep = make_tiny_checkpoint(golden_config(), dir_->path(), test_options(7));
    ASSERT_TRUE(rep.is_ok()) << rep.status().to_string();
    report_ = *rep;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static test::TempDir* dir_;
  static MakeTinyReport report_;
};
test::TempDir* MakeTinyGolden::dir_ = nullptr;
MakeTinyReport MakeTinyGolden::report_;

// Dequantized values of a stored tensor, decoded independently of the writer with formats.h.
std::vector<float> decode(const Checkpoint& ck, const std::string& name) {
  const TensorInfo* t = ck.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  const auto* b = reinterpret_cast<const uint8_t*>(t->data.data());
  std::vector<float> v;
  if (t->dtype == DType::kBF16) {
    for (size_t i = 0; i < t->n_elements; ++i) v.push_back(bf16_to_float(static_cast<uint16_t>(b[2 * i] | b[2 * i + 1] << 8)));
  } else if (t->dtype == DType::kF32) {
    v.resize(t->n_elements);
    std::memcpy(v.data(), b, v.size() * 4);
  } else if (t->dtype == DType::kF8E4M3) {
    const std::string stem = name.substr(0, name.size() - 7);
    const TensorInfo* s = ck.find(stem + ".scale");
    const auto* sb = reinterpret_cast<const uint8_t*>(s->data.data());
    const size_t rows = t->shape[0], cols = t->shape[1], scols = s->shape[1];
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        v.push_back(e4m3_to_float(b[r * cols + c]) * e8m0_to_float(sb[(r / 128) * scols + c / 128]));
  } else if (t->dtype == DType::kI8) {  // packed FP4, low nibble first, one scale per 32
    const std::string stem = name.substr(0, name.size() - 7);
    const TensorInfo* s = ck.find(stem + ".scale");
    const auto* sb = reinterpret_cast<const uint8_t*>(s->data.data());
    const size_t rows = t->shape[0], half = t->shape[1], scols = s->shape[1];
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < 2 * half; ++c) {
        const uint8_t byte = b[r * half + c / 2];
        const float q = c % 2 == 0 ? e2m1_unpack_lo(byte) : e2m1_unpack_hi(byte);
        v.push_back(q * e8m0_to_float(sb[r * scols + c / 32]));
      }
  }
  return v;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s / static_cast<double>(v.size()));
}

TEST_F(MakeTinyGolden, HasExactlyTheGoldenTensorSetAndPassesCheck) {
  auto ck = Checkpoint::open(dir_->path());
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  auto golden = Checkpoint::open(golden_dir());
  ASSERT_TRUE(golden.is_ok());
  ASSERT_EQ(ck->tensors().size(), golden->tensors().size());
  for (size_t i = 0; i < ck->tensors().size(); ++i) {  // both sorted by name
    const auto& a = ck->tensors()[i];
    const auto& g = golden->tensors()[i];
    EXPECT_EQ(a.name, g.name);
    EXPECT_EQ(a.dtype, g.dtype) << a.name;
    EXPECT_EQ(a.shape, g.shape) << a.name;
  }
  EXPECT_EQ(ck->total_bytes(), golden->total_bytes());
  EXPECT_TRUE(check_checkpoint(golden_config(), *ck).ok());
  EXPECT_EQ(report_.n_shards, 2);
  EXPECT_FALSE(report_.tokenizer_copied);  // vocab 1024 cannot use the real tokenizer
  EXPECT_NE(report_.note.find("vocab_size 1024"), std::string::npos);
}

TEST_F(MakeTinyGolden, ConfigsUseOfficialNamesAndRoundTrip) {
  using nlohmann::json;
  const json ours = json::parse(test::read_text_file(dir_->path() / "config.json"));
  const json gold = json::parse(test::read_text_file(golden_dir() / "config.json"));
  std::set<std::string> ok, gk;
  for (auto it = ours.begin(); it != ours.end(); ++it) ok.insert(it.key());
  for (auto it = gold.begin(); it != gold.end(); ++it) gk.insert(it.key());
  EXPECT_EQ(ok, gk);
  for (auto it = gold.begin(); it != gold.end(); ++it) EXPECT_EQ(ours[it.key()], *it) << it.key();
  const json our_inf = json::parse(test::read_text_file(dir_->path() / "inference/config.json"));
  const json gold_inf = json::parse(test::read_text_file(golden_dir() / "inference/config.json"));
  for (auto it = gold_inf.begin(); it != gold_inf.end(); ++it) {
    if (it.key() == "max_batch_size") continue;
    EXPECT_EQ(our_inf[it.key()], *it) << it.key();
  }
  auto back = load_model_config(dir_->path());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(hf_config_json(*back), hf_config_json(golden_config()));
}

TEST_F(MakeTinyGolden, QuantizedCodesDecodeToTheDrawnWeights) {
  auto ck = Checkpoint::open(dir_->path());
  ASSERT_TRUE(ck.is_ok());
  const ModelConfig cfg = golden_config();
  int checked_fp8 = 0, checked_fp4 = 0;
  for (const ExpectedTensor& t : expected_tensors(cfg)) {
    const bool fp8 = t.format == TensorFormat::kFp8Block, fp4 = t.format == TensorFormat::kFp4Packed;
    if (!(t.layer == 1 || t.layer == 6) || (t.expert > 1)) continue;  // a CSA layer and the MTP block
    if (!fp8 && !fp4 && !(t.format == TensorFormat::kPlain && t.dtype != DType::kI64)) continue;
    const DrawShape ds = draw_shape(t);
    const std::vector<float> w = draw_rows(t, 7, 0, ds.rows);
    const std::vector<float> dq = decode(*ck, t.name);
    ASSERT_EQ(w.size(), dq.size()) << t.name;
    const TensorInfo* scale = fp8 || fp4 ? ck->find(t.name.substr(0, t.name.size() - 7) + ".scale") : nullptr;
    for (size_t i = 0; i < w.size(); ++i) {
      const size_t r = i / ds.cols, c = i % ds.cols;
      if (fp8) {
        const uint8_t e = reinterpret_cast<const uint8_t*>(scale->data.data())[(r / 128) * scale->shape[1] + c / 128];
        const double s = e8m0_to_float(e);
        // E4M3: 3 mantissa bits (half-ulp 2^-4 relative), subnormal step 2^-9 (half 2^-10).
        ASSERT_LE(std::fabs(w[i] - dq[i]) / s, std::max(std::fabs(w[i]) / s * 0.0625, std::ldexp(1.0, -10)) + 1e-12)
            << t.name << "[" << i << "]";
      } else if (fp4) {
        const uint8_t e = reinterpret_cast<const uint8_t*>(scale->data.data())[r * scale->shape[1] + c / 32];
        const double s = e8m0_to_float(e);
        // E2M1 grid {0,.5,1,1.5,2,3,4,6}: the half-step is at most a quarter of max(1, |x|).
        ASSERT_LE(std::fabs(w[i] - dq[i]) / s, 0.25 * std::max(1.0, std::fabs(w[i]) / s) + 1e-12) << t.name << "[" << i << "]";
      } else if (t.dtype == DType::kBF16) {
        ASSERT_LE(std::fabs(w[i] - dq[i]), std::fabs(w[i]) * std::ldexp(1.0, -8)) << t.name;
      } else {
        ASSERT_EQ(w[i], dq[i]) << t.name;
      }
    }
    // The scale is the smallest power of two that fits the block: its amax lands in (qmax/2, qmax].
    if (fp8 || fp4) {
      const uint8_t* sb = reinterpret_cast<const uint8_t*>(scale->data.data());
      const double qmax = fp8 ? 448.0 : 6.0;
      std::vector<double> amax(scale->n_elements, 0.0);
      for (size_t i = 0; i < w.size(); ++i) {
        const size_t r = i / ds.cols, c = i % ds.cols;
        const size_t si = fp8 ? (r / 128) * scale->shape[1] + c / 128 : r * scale->shape[1] + c / 32;
        amax[si] = std::max(amax[si], static_cast<double>(std::fabs(w[i])));
      }
      for (size_t si = 0; si < amax.size(); ++si) {
        const double ratio = amax[si] / e8m0_to_float(sb[si]);
        ASSERT_GT(ratio, qmax / 2) << t.name << " block " << si;
        ASSERT_LE(ratio, qmax) << t.name << " block " << si;
      }
      (fp8 ? checked_fp8 : checked_fp4)++;
    }
  }
  EXPECT_GE(checked_fp8, 10);
  EXPECT_GE(checked_fp4, 6);
}

TEST_F(MakeTinyGolden, MagnitudesMatchTheGoldenCheckpoint) {
  auto ck = Checkpoint::open(dir_->path());
  auto golden = Checkpoint::open(golden_dir());
  ASSERT_TRUE(ck.is_ok() && golden.is_ok());
  // Every float tensor with enough elements for a stable RMS, in two layers, must be within 15% of the
  // golden's own tensor (dequantized the same way).
  int n = 0;
  for (const auto& t : golden->tensors()) {
    if (t.n_elements < 1024 || t.dtype == DType::kI64 || t.dtype == DType::kF8E8M0) continue;
    if (!(t.name.rfind("layers.3.", 0) == 0 || t.name.rfind("mtp.0.", 0) == 0 || t.name.find('.') == t.name.rfind('.')))
      continue;
    if (t.name.find(".experts.") != std::string::npos && t.name.find(".experts.5.") == std::string::npos) continue;
    const double ours = rms(decode(*ck, t.name)), theirs = rms(decode(*golden, t.name));
    EXPECT_NEAR(ours / theirs, 1.0, 0.15) << t.name << ": ours " << ours << " golden " << theirs;
    ++n;
  }
  EXPECT_GE(n, 20);
}

TEST_F(MakeTinyGolden, Tid2eidRowsHoldDistinctExpertsInRange) {
  auto ck = Checkpoint::open(dir_->path());
  ASSERT_TRUE(ck.is_ok());
  for (const char* name : {"layers.0.ffn.gate.tid2eid", "layers.1.ffn.gate.tid2eid"}) {
    const TensorInfo* t = ck->find(name);
    ASSERT_NE(t, nullptr);
    std::vector<int64_t> ids(t->n_elements);
    std::memcpy(ids.data(), t->data.data(), ids.size() * 8);
    std::vector<int> count(8, 0);
    for (size_t r = 0; r < t->shape[0]; ++r) {
      const int64_t a = ids[2 * r], b = ids[2 * r + 1];
      ASSERT_TRUE(a >= 0 && a < 8 && b >= 0 && b < 8) << name << " row " << r;
      ASSERT_NE(a, b) << name << " row " << r;
      ++count[a];
      ++count[b];
    }
    for (int c : count) EXPECT_GT(c, 2 * 1024 / 8 / 2) << name;  // roughly uniform over experts
  }
}

std::string read_bytes(const fs::path& p) { return test::read_text_file(p); }

TEST(MakeTiny, SameSeedSameBytesDifferentSeedDifferentBytes) {
  const ModelConfig cfg = golden_config();
  test::TempDir a, b, c;
  MakeTinyOptions one_thread = test_options(3);
  one_thread.n_threads = 1;
  MakeTinyOptions three_threads = test_options(3);
  three_threads.n_threads = 3;  // threading must not change a byte
  ASSERT_TRUE(make_tiny_checkpoint(cfg, a.path(), one_thread).is_ok());
  ASSERT_TRUE(make_tiny_checkpoint(cfg, b.path(), three_threads).is_ok());
  ASSERT_TRUE(make_tiny_checkpoint(cfg, c.path(), test_options(4)).is_ok());
  for (const char* f : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json", "config.json"}) {
    const std::string x = read_bytes(a / f), y = read_bytes(b / f), z = read_bytes(c / f);
    ASSERT_FALSE(x.empty()) << f;
    EXPECT_TRUE(x == y) << f << " differs for the same seed";
    if (std::string(f).find("safetensors") != std::string::npos && std::string(f).find("index") == std::string::npos) {
      EXPECT_EQ(x.size(), z.size()) << f;
      EXPECT_FALSE(x == z) << f << " identical for different seeds";
    }
  }
}

TEST(MakeTiny, RefusesToOverwriteAModel) {
  test::TempDir d;
  test::write_text_file(d / "config.json", "{}");
  auto r = make_tiny_checkpoint(golden_config(), d.path(), test_options(1));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().rule(), "make_tiny.exists");
}

TEST(MakeTiny, PresetsAreValidAndCoverEveryAttentionKind) {
  for (const char* name : {"tiny", "small", "medium"}) {
    auto cfg = make_tiny_preset(name);
    ASSERT_TRUE(cfg.is_ok()) << name << ": " << cfg.status().to_string();
    std::set<AttentionKind> kinds;
    for (int64_t il = 0; il < cfg->n_layers; ++il) kinds.insert(cfg->attention_kind(il));
    EXPECT_EQ(kinds.size(), 3u) << name;
    EXPECT_EQ(cfg->vocab_size, 129280) << name;
    EXPECT_GE(cfg->n_hash_layers, 1) << name;
  }
  auto medium = make_tiny_preset("medium");
  EXPECT_EQ(medium->dim, 4096);
  EXPECT_EQ(medium->n_heads * medium->head_dim, 64 * 512);
  EXPECT_EQ(medium->n_routed_experts, 64);
  EXPECT_EQ(medium->n_activated_experts, 6);
  auto tiny = make_tiny_preset("tiny");
  // spec §6 tiny config apart from the real vocabulary.
  EXPECT_EQ(tiny->compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 8, 0, 0}));
  EXPECT_EQ(tiny->window_size, 16);
  EXPECT_EQ(make_tiny_preset("huge").status().rule(), "make_tiny.preset");
  // spec §6 "Size": about 80M parameters, 66M of them embed + head.
  const ParamCost p = param_cost(*tiny);
  EXPECT_NEAR(static_cast<double>(p.params_total), 80e6, 0.03 * 80e6);
  EXPECT_EQ(2 * p.params_embedding, 2ull * 129280 * 256);
}

}  // namespace
}  // namespace dsv4
