// unit: the FP8 KV row layout of core/kv_row.h (584 bytes at the official 512 dims, lossless on rows
// carrying the reference's QAT rounding) and the runtime's paged block pool (reference counts, all-or-nothing allocation, byte budget -> blocks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/formats.h"
#include "core/kv_row.h"
#include "core/quant.h"
#include "runtime/block_pool.h"

namespace dsv4 {
namespace {

constexpr KvRowLayout kOfficial{512, 64};
constexpr int kKvDims = 512;
constexpr int kKvNopeDims = 448;
constexpr int kKvEntryBytes = 584;

void encode_kv_fp8(std::span<const float> row, std::span<uint8_t> entry) { encode_kv_row(kOfficial, row, entry); }
void decode_kv_fp8(std::span<const uint8_t> entry, std::span<float> row) { decode_kv_row(kOfficial, entry, row); }

TEST(RuntimeKvFp8, RowBytesPerConfig) {
  EXPECT_EQ(kOfficial.bytes(), 584);                // 448 E4M3 + 128 BF16 + 7 scales + 1 pad (spec §4)
  EXPECT_EQ((KvRowLayout{128, 64}.bytes()), 200);   // golden tiny / make-tiny tiny: 64 + 128 + 1 + 7 pad
  EXPECT_EQ((KvRowLayout{256, 64}.bytes()), 328);   // make-tiny small: 192 + 128 + 3 + 5 pad
  EXPECT_FALSE((KvRowLayout{100, 64}.valid()));     // 36 nope dims: not whole 64-blocks
}

TEST(RuntimeKvFp8, LosslessOnSmallerRows) {
  // A 256-dim row (make-tiny small): 3 scale blocks, 64 rope dims, zero padding.
  const KvRowLayout l{256, 64};
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 2.0f);
  std::vector<float> row(256), back(256);
  std::vector<uint8_t> e(static_cast<size_t>(l.bytes()), 0xAA);
  for (int rep = 0; rep < 20; ++rep) {
    for (float& x : row) x = n(rng);
    fake_quant_fp8(std::span<float>(row).first(192), 64);
    for (int i = 192; i < 256; ++i) row[static_cast<size_t>(i)] = round_bf16(row[static_cast<size_t>(i)]);
    encode_kv_row(l, row, e);
    decode_kv_row(l, e, back);
    ASSERT_EQ(row, back);
    for (size_t i = 192 + 128 + 3; i < e.size(); ++i) EXPECT_EQ(e[i], 0) << "pad byte " << i;
  }
}

// A KV row as the reference leaves it (spec §2.3): nope dims fake-quantized in 64-blocks, rope dims bf16.
std::vector<float> qat_row(std::mt19937& rng, float magnitude) {
  std::normal_distribution<float> n(0.0f, magnitude);
  std::vector<float> row(kKvDims);
  for (float& x : row) x = n(rng);
  if (magnitude > 1.0f) row[5] = 0.0f;  // exact zeros survive
  fake_quant_fp8(std::span<float>(row).first(kKvNopeDims), 64);
  for (int i = kKvNopeDims; i < kKvDims; ++i) row[static_cast<size_t>(i)] = round_bf16(row[static_cast<size_t>(i)]);
  return row;
}

TEST(RuntimeKvFp8, LosslessOnQatRows) {
  std::mt19937 rng(7);
  std::vector<uint8_t> entry(kKvEntryBytes);
  std::vector<float> back(kKvDims);
  for (float magnitude : {1e-6f, 1e-3f, 0.05f, 1.0f, 30.0f, 3000.0f}) {
    for (int r = 0; r < 50; ++r) {
      std::vector<float> row = qat_row(rng, magnitude);
      if (r == 0) std::fill(row.begin() + 64, row.begin() + 128, 0.0f);  // an all-zero block
      encode_kv_fp8(row, entry);
      decode_kv_fp8(entry, back);
      for (int i = 0; i < kKvDims; ++i) {
        ASSERT_EQ(row[static_cast<size_t>(i)], back[static_cast<size_t>(i)]) << "dim " << i << " magnitude " << magnitude;
      }
      EXPECT_EQ(entry[kKvEntryBytes - 1], 0);
    }
  }
}

TEST(RuntimeKvFp8, LayoutMatchesSpec) {
  std::vector<float> row(kKvDims, 0.0f);
  row[0] = 300.0f;        // block 0: amax/448 = 0.67 -> scale 1 -> e8m0 127; 300 rounds to 288 = 0x79
  row[64] = 1.0f;         // block 1: amax 1 -> scale 2^-8 -> code for 256 = 0x78
  row[448] = 1.5f;        // rope dim 0: bf16 0x3FC0, little-endian
  std::vector<uint8_t> e(kKvEntryBytes, 0xAA);
  encode_kv_fp8(row, e);
  EXPECT_EQ(e[576], 127);
  EXPECT_EQ(e[577], 127 - 8);
  EXPECT_EQ(e[0], 0x79);
  EXPECT_EQ(e[64], 0x78);
  EXPECT_EQ(e[448], 0xC0);
  EXPECT_EQ(e[449], 0x3F);
  EXPECT_EQ(e[583], 0);
}

TEST(RuntimeKvFp8, OffGridRowsAreNotReproduced) {
  // Negative control: the lossless claim depends on the QAT grid; an arbitrary row loses bits.
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> row(kKvDims);
  for (float& x : row) x = n(rng);
  std::vector<uint8_t> e(kKvEntryBytes);
  std::vector<float> back(kKvDims);
  encode_kv_fp8(row, e);
  decode_kv_fp8(e, back);
  int differing = 0;
  for (int i = 0; i < kKvDims; ++i) differing += row[static_cast<size_t>(i)] != back[static_cast<size_t>(i)];
  EXPECT_GT(differing, 400);
}

TEST(RuntimeBlockPool, RefcountsAndAllOrNothing) {
  BlockPool pool(4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.allocate(3, &a).is_ok());
  EXPECT_EQ(pool.free_count(), 1);
  const Status st = pool.allocate(2, &b);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(st.rule(), "pool.exhausted");
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pool.free_count(), 1);
  pool.retain(a[0]);
  EXPECT_EQ(pool.refcount(a[0]), 2);
  pool.release(a[0]);
  EXPECT_EQ(pool.free_count(), 1);  // still owned once
  pool.release_all(&a);
  EXPECT_EQ(pool.free_count(), 4);
  EXPECT_TRUE(a.empty());
}

TEST(RuntimeBlockPool, PlanFromBytes) {
  StateFootprint f;
  f.window_ring_per_seq = 1000;
  f.compressor_partial_per_seq = 24;
  f.compressed_main_per_token = 146;
  f.compressed_indexer_per_token = 17;
  auto plan = plan_pool(f, 100000, 16);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_EQ(plan->block_bytes, 163 * 16);       // 2608
  EXPECT_EQ(plan->seq_blocks, 1);               // 1024 bytes fit in one block
  EXPECT_EQ(plan->n_blocks, 100000 / 2608);     // 38
  EXPECT_EQ(plan->blocks_for(0), 1);
  EXPECT_EQ(plan->blocks_for(16), 2);
  EXPECT_EQ(plan->blocks_for(17), 3);
  EXPECT_EQ(plan->bytes_for(10), 1024 + 1630);
  EXPECT_EQ(plan_pool(f, 100, 16).status().rule(), "pool.budget_too_small");
  EXPECT_EQ(plan_pool(f, 100000, 0).status().rule(), "pool.bad_block_tokens");
}

}  // namespace
}  // namespace dsv4
