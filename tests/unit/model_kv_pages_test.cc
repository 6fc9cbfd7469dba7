// unit: the paged state of a sequence (model/kv_pages.h, sequence_state.h): FP8 compressed and window rows, FP4
// indexer keys, fp32 partial blocks. Pool and page-table mechanics (copy-on-write sharing, truncation, sliding,
// budget, the peak-page prediction) against hand-counted pages and real appends; the FP8 store is lossless on the
// rows the real model produces (golden tiny checkpoint: every stored row and every logit, prefill, decode and a chunk,
// is bit-identical to an fp32 store; a perturbed window row is detected); one byte budget over all pools refuses a
// forward before touching any state.
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

// Pages cached while the budget was unlimited are freed when a limit is set, in every pool drawing on it,
// so the bytes held come down to the bytes in use at once; pages in use keep their rows. Oracle: the
// pools' own counts of pages held against hand-counted pages, and the rows read back.
TEST(ModelKvPages, SettingABudgetFreesPagesCachedWhileUnlimited) {
  auto budget = std::make_shared<PageBudget>();
  auto rows_pool = std::make_shared<KvPagePool>(kTinyRow, KvStorage::kFp8, 4, budget);
  auto f32_pool = std::make_shared<KvPagePool>(KvRowLayout{8, 0}, KvStorage::kF32, 4, budget);
  std::mt19937 rng(3);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 12; ++i) rows.push_back(qat_row(rng));
  KvPageTable kept(rows_pool);
  for (int i = 0; i < 6; ++i) kept.append(rows[static_cast<size_t>(i)]);  // 2 pages, stay in use
  {
    KvPageTable gone(rows_pool);
    for (int i = 0; i < 12; ++i) gone.append(rows[static_cast<size_t>(i)]);  // 3 pages, then released
    KvPageTable partial(f32_pool);
    for (int i = 0; i < 9; ++i) partial.append(std::vector<float>(8, static_cast<float>(i)));  // 3 pages
  }
  // Unlimited: the released pages stay cached.
  EXPECT_EQ(rows_pool->stats().pages_in_use, 2);
  EXPECT_EQ(rows_pool->stats().pages_created, 5);
  EXPECT_EQ(f32_pool->stats().pages_created, 3);

  // A limit above what is in use but below what is held: both pools drop their cached pages now.
  const int64_t in_use = rows_pool->stats().bytes_in_use();
  ASSERT_EQ(budget->bytes_in_use(), in_use);
  const int64_t limit = in_use + rows_pool->page_bytes();
  ASSERT_LT(limit, rows_pool->stats().bytes_held() + f32_pool->stats().bytes_held());
  budget->set_max_bytes(limit);
  EXPECT_EQ(rows_pool->stats().pages_created, 2);
  EXPECT_EQ(rows_pool->stats().bytes_held(), in_use);
  EXPECT_EQ(f32_pool->stats().pages_created, 0);
  EXPECT_LE(rows_pool->stats().bytes_held() + f32_pool->stats().bytes_held(), limit);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(read(kept, i), rows[static_cast<size_t>(i)]) << "row " << i;

  // The freed ids are reused with fresh memory, within the limit.
  KvPageTable again(rows_pool);
  EXPECT_EQ(again.pages_needed(4), 1);
  for (int i = 0; i < 4; ++i) again.append(rows[static_cast<size_t>(6 + i)]);
  EXPECT_EQ(read(again, 3), rows[9]);
  EXPECT_EQ(rows_pool->stats().pages_created, 3);
  EXPECT_EQ(rows_pool->available_pages(), 0);

  // Back to unlimited: nothing is freed, and released pages are cached again.
  budget->set_max_bytes(0);
  again.clear();
  EXPECT_EQ(rows_pool->stats().pages_created, 3);
  EXPECT_EQ(rows_pool->stats().pages_in_use, 2);
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
  int64_t compared = 0, compared_keys = 0, compared_window = 0;
  for (size_t il = 0; il < s8->layers.size(); ++il) {
    const KvPageTable& a = s8->layers[il].compressor.rows;
    const KvPageTable& b = s32->layers[il].compressor.rows;
    ASSERT_EQ(a.size(), b.size()) << "layer " << il;
    for (int64_t t = 0; t < a.size(); ++t, ++compared)
      ASSERT_EQ(read(a, t), read(b, t)) << "layer " << il << " row " << t;
    // Window rows: FP8 vs fp32 (the last 16 positions).
    const KvPageTable& wa = s8->layers[il].window;
    const KvPageTable& wb = s32->layers[il].window;
    for (int64_t p = 70 - 16; p < 70; ++p, ++compared_window)
      ASSERT_EQ(read(wa, p), read(wb, p)) << "layer " << il << " window row " << p;
    // Indexer keys: packed FP4 vs fp32.
    const KvPageTable& ka = s8->layers[il].index_keys.rows;
    const KvPageTable& kb = s32->layers[il].index_keys.rows;
    ASSERT_EQ(ka.size(), kb.size()) << "layer " << il;
    for (int64_t t = 0; t < ka.size(); ++t, ++compared_keys)
      ASSERT_EQ(read(ka, t), read(kb, t)) << "layer " << il << " key " << t;
  }
  EXPECT_EQ(compared, 2 * 17 + 8);
  EXPECT_EQ(compared_keys, 2 * 17);
  EXPECT_EQ(compared_window, 6 * 16);
  EXPECT_EQ(fp8->index_pages().row_bytes(), 68);
  EXPECT_EQ(f32->index_pages().row_bytes(), 512);
  EXPECT_EQ(l8, l32);  // attention over decoded FP8 rows == over fp32 rows, bit for bit
  EXPECT_EQ(fp8->kv_pages().row_bytes(), 200);
  EXPECT_EQ(f32->kv_pages().row_bytes(), 512);
  EXPECT_EQ(fp8->kv_pages().stats().pages_in_use, 3);  // one page per layer with rows
  // Decode and a chunk continue bit-identically too, and a perturbed window row is detected.
  std::vector<BatchToken> step = {{0, 70, 11, true}, {0, 71, 12, true}, {0, 72, 13, true}};
  SequenceState untouched = *s8, clean = *s8, perturbed = *s8;  // share every page (copy-on-write)
  ASSERT_TRUE(fp8->forward(step, p8, &l8).is_ok());
  ASSERT_TRUE(f32->forward(step, p32, &l32).is_ok());
  EXPECT_EQ(l8, l32);
  for (int i = 0; i < 3; ++i) step[static_cast<size_t>(i)].pos += 3;
  ASSERT_TRUE(fp8->forward({step.data(), 1}, p8, &l8).is_ok());
  ASSERT_TRUE(f32->forward({step.data(), 1}, p32, &l32).is_ok());
  EXPECT_EQ(l8, l32);
  // Negative control: layer 0's newest window row rewritten in copies of the state before the step;
  // the same row rewritten changes nothing, one nope dim scaled by 1.25 changes the logits.
  std::vector<float> row(128);
  for (SequenceState* c : {&clean, &perturbed}) {
    c->layers[0].window.read(69, row.data());
    c->layers[0].window.truncate(69);
    if (c == &perturbed) row[3] = row[3] != 0.0f ? row[3] * 1.25f : 1.0f;
    c->layers[0].window.append(row);
  }
  const std::vector<BatchToken> probe = {{0, 70, 11, true}};
  std::vector<float> lu, lc, lp;
  for (auto [st, out] : {std::pair{&untouched, &lu}, std::pair{&clean, &lc}, std::pair{&perturbed, &lp}}) {
    SequenceState* one[] = {st};
    ASSERT_TRUE(fp8->forward(probe, one, out).is_ok());
  }
  EXPECT_EQ(lc, lu);
  EXPECT_NE(lp, lu);
  for (SequenceState* c : {&untouched, &clean, &perturbed}) *c = SequenceState{};
  // A pool cannot be swapped under live pages.
  EXPECT_EQ(fp8->configure_kv_pages(KvStorage::kF32, 0).rule(), "model.kv_pages_in_use");
  s8.reset();
  EXPECT_EQ(fp8->kv_pages().stats().pages_in_use, 0);
}

// 40 tokens of the tiny model (window 16; L1, L3 r=4 with indexer; L2 r=128; L4 r=8; 128-dim rows: FP8
// 200 B, FP4 keys 68 B; pages of 64 rows), counted by hand from the layouts and slide policies:
//   window   6 layers × 1 page × 64·200                                          =  76800
//   partial  r=4 main + indexer (512 floats = 2048 B rows, 4-row pages): 2 blocks
//            = 2 pages each, ×2 compressors ×2 layers                            =  65536
//            r=128 (256 floats, 16-row pages): rows 0..39 of the open block, 3 pages =  49152
//            r=8 (256 floats, 8-row pages): the open block 32..39, 1 page         =   8192
//   rows     L1, L3 (10 rows), L4 (5 rows): a page each × 64·200                  =  38400
//   keys     L1, L3: a page each × 64·68                                          =   8704
constexpr int64_t kTiny40Bytes = 76800 + 65536 + 49152 + 8192 + 38400 + 8704;

TEST(ModelKvPages, EveryKindOfStateIsPagedAndCountedInBytes) {
  auto m = load_tiny(KvStorage::kFp8);
  ASSERT_TRUE(m);
  auto st = m->new_sequence();
  SequenceState* ps[] = {st.get()};
  std::vector<float> logits;
  ASSERT_TRUE(m->forward(prompt(40), ps, &logits).is_ok());
  const StateMemory mem = m->state_memory();
  EXPECT_EQ(mem.window.bytes_in_use, 76800);
  EXPECT_EQ(mem.partial.bytes_in_use, 65536 + 49152 + 8192);
  EXPECT_EQ(mem.main_rows.bytes_in_use, 38400);
  EXPECT_EQ(mem.index_keys.bytes_in_use, 8704);
  EXPECT_EQ(mem.bytes_in_use(), kTiny40Bytes);
  // The window slides: 200 more tokens still hold at most ceil(16/64)+1 pages per layer, the partial
  // rows only the open blocks; the compressed rows grow.
  std::vector<BatchToken> more;
  for (int i = 40; i < 240; ++i) more.push_back({0, i, 2 + i, false});
  ASSERT_TRUE(m->forward(more, ps, &logits).is_ok());
  for (const LayerState& l : st->layers) {
    EXPECT_LE(l.window.n_pages(), 2);
    EXPECT_EQ(l.window.first_row(), 192);  // 240 − 16 = 224 lies in page 3 (rows 192..255)
  }
  EXPECT_EQ(m->state_memory().window.pages_in_use, 6);
  EXPECT_EQ(st->layers[2].compressor.partial.first_row(), 128);  // r=128: block 1 is open
  EXPECT_EQ(st->layers[2].compressor.rows.size(), 1);
  st.reset();
  EXPECT_EQ(m->state_memory().bytes_in_use(), 0);
  EXPECT_GT(m->state_memory().bytes_held(), 0);  // kept for reuse
  // A budget set afterwards frees what was kept, in every kind of pool (PageBudget::set_max_bytes).
  m->set_state_budget(kTiny40Bytes);
  EXPECT_EQ(m->state_memory().bytes_held(), 0);
}

TEST(ModelKvPages, BudgetRefusesAForwardBeforeTouchingState) {
  auto m = load_tiny(KvStorage::kFp8, kTiny40Bytes - 1);
  ASSERT_TRUE(m);
  auto st = m->new_sequence();
  SequenceState* ps[] = {st.get()};
  std::vector<float> logits;
  const Status s = m->forward(prompt(40), ps, &logits);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.rule(), "model.state_pages_exhausted");
  EXPECT_EQ(st->n_tokens(), 0);
  EXPECT_EQ(m->state_memory().bytes_in_use(), 0);
  EXPECT_TRUE(logits.empty());
  m->set_state_budget(kTiny40Bytes);  // exactly the peak the batch needs
  EXPECT_TRUE(m->forward(prompt(40), ps, &logits).is_ok());
  EXPECT_EQ(m->state_memory().bytes_in_use(), kTiny40Bytes);
  EXPECT_EQ(m->state_memory().budget_bytes, kTiny40Bytes);
  // A copy shares every page: the next token must copy the shared last pages (copy-on-write) and the
  // budget has no room for them.
  SequenceState copy = *st;
  EXPECT_EQ(m->state_memory().bytes_in_use(), kTiny40Bytes);
  const std::vector<BatchToken> next = {{0, 40, 5, true}};
  EXPECT_EQ(m->forward(next, ps, &logits).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st->n_tokens(), 40);
  m->set_state_budget(0);
  EXPECT_TRUE(m->forward(next, ps, &logits).is_ok());
  EXPECT_GT(m->state_memory().bytes_in_use(), kTiny40Bytes);
}

// pages_needed() replays append(): for sliding and growing tables, shared or not, it equals the peak
// number of pages the pool hands out while the table grows.
TEST(ModelKvPages, PagesNeededIsThePeakOfRealAppends) {
  std::mt19937 rng(3);
  for (const SlidePolicy slide : {SlidePolicy{}, SlidePolicy{1, 5}, SlidePolicy{4, 4}, SlidePolicy{8, 0}}) {
    for (int64_t start : {0, 3, 8, 13}) {
      for (bool shared : {false, true}) {
        auto pool = std::make_shared<KvPagePool>(kTinyRow, KvStorage::kFp8, /*page_rows=*/4);
        KvPageTable t(pool, slide);
        for (int64_t i = 0; i < start; ++i) t.append(qat_row(rng));
        KvPageTable other;
        if (shared) other = t;
        const int64_t base = pool->stats().pages_in_use, target = start + 19;
        const int64_t predicted = t.pages_needed(target);
        int64_t peak = 0;
        for (int64_t i = start; i < target; ++i) {
          t.append(qat_row(rng));
          peak = std::max(peak, pool->stats().pages_in_use - base);
        }
        EXPECT_EQ(predicted, peak) << "align " << slide.align << " lag " << slide.lag << " start " << start
                                   << " shared " << shared;
        if (slide.align == 1) {  // a 6-row window over 4-row pages: at most ceil(6/4)+1 pages
          EXPECT_LE(t.n_pages(), 3);
          EXPECT_EQ(t.first_row(), (target - 6) / 4 * 4);
        }
      }
    }
  }
}

TEST(ModelKvPages, SlidingWindowKeepsTheLastRowsExactly) {
  auto pool = std::make_shared<KvPagePool>(kTinyRow, KvStorage::kFp8, 4);
  KvPageTable t(pool, SlidePolicy{1, 5});  // window of 6
  std::mt19937 rng(5);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 23; ++i) {
    rows.push_back(qat_row(rng));
    t.append(rows.back());
    for (int64_t p = std::max<int64_t>(0, i - 5); p <= i; ++p) ASSERT_EQ(read(t, p), rows[static_cast<size_t>(p)]);
  }
  KvPageTable copy = t;  // a snapshot: shares the pages
  for (int i = 0; i < 9; ++i) t.append(qat_row(rng));
  for (int64_t p = 17; p < 23; ++p) EXPECT_EQ(read(copy, p), rows[static_cast<size_t>(p)]) << p;  // untouched
  copy.clear();
  t.clear();
  EXPECT_EQ(pool->stats().pages_in_use, 0);
}

}  // namespace
}  // namespace dsv4
