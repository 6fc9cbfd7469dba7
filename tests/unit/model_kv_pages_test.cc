// unit: the paged FP8 store of compressed KV rows and FP4 store of indexer keys (model/kv_pages.h). Pool and page-table
// mechanics (copy-on-write sharing, truncation, budget) against hand-counted pages; the FP8 store is lossless on the
// rows the real compressor produces (golden tiny checkpoint: every stored row and every logit is bit-identical to an
// fp32 store, indexer keys too); a budgeted pool refuses a forward before touching any state.
#include <gtest/gtest.h>

#include <random>

#include "core/formats.h"
#include "core/kv_row.h"
#include "core/quant.h"
#include "model/kv_pages.h"
#include "model/model.h"
#include "test_util.h"

namespace dsv4 {
namespace {

constexpr KvRowLayout kTinyRow{128, 64};

std::vector<float> qat_row(std::mt19937& rng) {
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> row(128);
  for (float& x : row) x = n(rng);
  fake_quant_fp8(std::span<float>(row).first(64), 64);
  for (size_t i = 64; i < 128; ++i) row[i] = round_bf16(row[i]);
  return row;
}

std::vector<float> read(const KvPageTable& t, int64_t i) {
  std::vector<float> out(128);
  t.read(i, out.data());
  return out;
}

TEST(ModelKvPages, Fp4IndexKeysAreLosslessOnTheFp4Grid) {
  std::mt19937 rng(4);
  std::vector<uint8_t> e(static_cast<size_t>(index_key_bytes(128)));
  EXPECT_EQ(e.size(), 68u);
  std::vector<float> key(128), back(128);
  for (float magnitude : {1e-30f, 1e-3f, 1.0f, 50.0f}) {
    std::normal_distribution<float> n(0.0f, magnitude);
    for (int rep = 0; rep < 50; ++rep) {
      for (float& x : key) x = n(rng);
      if (rep == 0) std::fill(key.begin() + 32, key.begin() + 64, 0.0f);  // an all-zero block
      fake_quant_fp4(key, 32);
      encode_index_key(key, e);
      decode_index_key(e, back);
      ASSERT_EQ(key, back) << "magnitude " << magnitude;
    }
  }
  // Negative control: keys off the FP4 grid lose bits.
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (float& x : key) x = n(rng);
  encode_index_key(key, e);
  decode_index_key(e, back);
  int differing = 0;
  for (size_t i = 0; i < key.size(); ++i) differing += key[i] != back[i];
  EXPECT_GT(differing, 100);
}

TEST(ModelKvPages, CopiesSharePagesAndWritesCopyOnWrite) {
  auto pool = std::make_shared<KvPagePool>(kTinyRow, KvStorage::kFp8, /*page_rows=*/4);
  EXPECT_EQ(pool->page_bytes(), 4 * 200);
  std::mt19937 rng(1);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 12; ++i) rows.push_back(qat_row(rng));
  {
    KvPageTable a(pool);
    for (int i = 0; i < 10; ++i) a.append(rows[static_cast<size_t>(i)]);
    EXPECT_EQ(a.n_pages(), 3);  // 4 + 4 + 2
    EXPECT_EQ(pool->stats().pages_in_use, 3);
    KvPageTable b = a;  // shares every page, copies no row
    EXPECT_EQ(pool->stats().pages_in_use, 3);
    for (int64_t p = 0; p < 3; ++p) EXPECT_EQ(pool->refcount(a.page_id(p)), 2);
    EXPECT_EQ(a.pages_needed(11), 1);  // the shared partial page must be copied first
    a.append(rows[10]);
    EXPECT_EQ(pool->stats().pages_in_use, 4);
    EXPECT_NE(a.page_id(2), b.page_id(2));
    EXPECT_EQ(a.page_id(1), b.page_id(1));
    EXPECT_EQ(pool->refcount(b.page_id(2)), 1);
    EXPECT_EQ(b.pages_needed(11), 0);  // now b's alone: written in place
    b.append(rows[11]);
    EXPECT_EQ(pool->stats().pages_in_use, 4);
    for (int64_t i = 0; i < 10; ++i) {
      EXPECT_EQ(read(a, i), rows[static_cast<size_t>(i)]) << i;
      EXPECT_EQ(read(b, i), rows[static_cast<size_t>(i)]) << i;
    }
    EXPECT_EQ(read(a, 10), rows[10]);
    EXPECT_EQ(read(b, 10), rows[11]);
    // Truncating b to one page: its private third page is freed, the shared second one stays with a.
    b.truncate(4);
    EXPECT_EQ(b.n_pages(), 1);
    EXPECT_EQ(pool->stats().pages_in_use, 3);
    EXPECT_EQ(pool->refcount(a.page_id(1)), 1);
    EXPECT_EQ(pool->refcount(a.page_id(0)), 2);
    b.append(rows[4]);  // page 0 is full: a fresh page, the shared one untouched
    EXPECT_EQ(pool->refcount(a.page_id(0)), 2);
    EXPECT_EQ(read(b, 4), rows[4]);
    KvPageTable c = std::move(b);
    EXPECT_EQ(b.n_pages(), 0);
    EXPECT_EQ(c.size(), 5);
  }
  EXPECT_EQ(pool->stats().pages_in_use, 0);
  EXPECT_EQ(pool->stats().pages_created, 4);  // peak use; kept for reuse
}

TEST(ModelKvPages, BudgetIsCountedInPages) {
  auto pool = std::make_shared<KvPagePool>(kTinyRow, KvStorage::kFp8, 4, /*max_bytes=*/2 * 4 * 200 + 100);
  EXPECT_EQ(pool->stats().max_pages, 2);
  std::mt19937 rng(2);
  KvPageTable a(pool);
  EXPECT_EQ(a.pages_needed(8), 2);
  EXPECT_EQ(a.pages_needed(9), 3);
  for (int i = 0; i < 8; ++i) a.append(qat_row(rng));
  EXPECT_EQ(pool->available_pages(), 0);
  int32_t id = 0;
  uint8_t* data = nullptr;
  EXPECT_FALSE(pool->allocate(&id, &data));
  a.truncate(3);
  EXPECT_EQ(pool->available_pages(), 1);
}

std::unique_ptr<Model> load_tiny(KvStorage storage, int64_t max_bytes = 0) {
  auto m = Model::load(test::shared_dir() / "golden/tiny/checkpoint");
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return nullptr;
  EXPECT_TRUE((*m)->configure_kv_pages(storage, max_bytes).is_ok());
  return std::move(m).value();
}

std::vector<BatchToken> prompt(int n) {
  std::vector<BatchToken> b;
  for (int i = 0; i < n; ++i) b.push_back({0, i, 2 + (i * 7919) % 1000, true});
  return b;
}

TEST(ModelKvPages, Fp8StoreIsLosslessOnTheRealCompressorRows) {
  auto fp8 = load_tiny(KvStorage::kFp8);
  auto f32 = load_tiny(KvStorage::kF32);
  ASSERT_TRUE(fp8 && f32);
  const auto batch = prompt(70);  // r=4: 17 rows, r=8: 8, r=128: none yet
  auto s8 = fp8->new_sequence();
  auto s32 = f32->new_sequence();
  SequenceState* p8[] = {s8.get()};
  SequenceState* p32[] = {s32.get()};
  std::vector<float> l8, l32;
  ASSERT_TRUE(fp8->forward(batch, p8, &l8).is_ok());
  ASSERT_TRUE(f32->forward(batch, p32, &l32).is_ok());
  int64_t compared = 0, compared_keys = 0;
  for (size_t il = 0; il < s8->layers.size(); ++il) {
    const KvPageTable& a = s8->layers[il].compressor.rows;
    const KvPageTable& b = s32->layers[il].compressor.rows;
    ASSERT_EQ(a.size(), b.size()) << "layer " << il;
    for (int64_t t = 0; t < a.size(); ++t, ++compared)
      ASSERT_EQ(read(a, t), read(b, t)) << "layer " << il << " row " << t;
    // Indexer keys: packed FP4 vs fp32.
    const KvPageTable& ka = s8->layers[il].index_keys.rows;
    const KvPageTable& kb = s32->layers[il].index_keys.rows;
    ASSERT_EQ(ka.size(), kb.size()) << "layer " << il;
    for (int64_t t = 0; t < ka.size(); ++t, ++compared_keys)
      ASSERT_EQ(read(ka, t), read(kb, t)) << "layer " << il << " key " << t;
  }
  EXPECT_EQ(compared, 2 * 17 + 8);
  EXPECT_EQ(compared_keys, 2 * 17);
  EXPECT_EQ(fp8->index_pages().row_bytes(), 68);
  EXPECT_EQ(f32->index_pages().row_bytes(), 512);
  EXPECT_EQ(l8, l32);  // attention over decoded FP8 rows == over fp32 rows, bit for bit
  EXPECT_EQ(fp8->kv_pages().row_bytes(), 200);
  EXPECT_EQ(f32->kv_pages().row_bytes(), 512);
  EXPECT_EQ(fp8->kv_pages().stats().pages_in_use, 3);  // one page per layer with rows
  // A pool cannot be swapped under live pages.
  EXPECT_EQ(fp8->configure_kv_pages(KvStorage::kF32, 0).rule(), "model.kv_pages_in_use");
  s8.reset();
  EXPECT_EQ(fp8->kv_pages().stats().pages_in_use, 0);
}

TEST(ModelKvPages, BudgetRefusesAForwardBeforeTouchingState) {
  const int64_t page = 64 * 200;
  auto m = load_tiny(KvStorage::kFp8, 2 * page);
  ASSERT_TRUE(m);
  auto st = m->new_sequence();
  SequenceState* ps[] = {st.get()};
  std::vector<float> logits;
  const Status s = m->forward(prompt(40), ps, &logits);  // 3 layers with rows need 3 pages
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.rule(), "model.kv_pages_exhausted");
  EXPECT_EQ(st->n_tokens(), 0);
  EXPECT_EQ(m->kv_pages().stats().pages_in_use, 0);
  EXPECT_TRUE(m->forward(prompt(7), ps, &logits).is_ok());  // r=4 rows only: 2 pages fit
  EXPECT_EQ(m->kv_pages().stats().pages_in_use, 2);
  st.reset();
  ASSERT_TRUE(m->configure_kv_pages(KvStorage::kFp8, 3 * page).is_ok());
  st = m->new_sequence();
  ps[0] = st.get();
  EXPECT_TRUE(m->forward(prompt(40), ps, &logits).is_ok());
}

}  // namespace
}  // namespace dsv4
