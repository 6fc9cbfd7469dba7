// kernels: lightning-indexer scores (split across the pool by keys; each key's score is one fixed
// sequence of operations, so thread count and tiling change no bit) and the radix top-k.
#include "kernels/cpu/indexer.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/check.h"
#include "core/kv_row.h"
#include "core/thread_pool.h"
#include "kernels/cpu/attention_tiles.h"

namespace dsv4::kernels {

namespace {

// Keys per pool chunk, for float and packed keys alike: whole 32-key groups (the VDPBF16PS loop's; two or
// more of the other loops' groups, so a key's group does not depend on the split), and at least ~1M
// multiply-adds per chunk (~8 us on VDPBF16PS): each chunk converts q again, and a small call should not
// pay a pool wake-up for microseconds of work.
int64_t score_grain(int64_t n_heads, int64_t head_dim) {
  return std::max<int64_t>(32, (((int64_t{1} << 20) / (n_heads * head_dim) + 31) / 32) * 32);
}

// How a tier scores packed keys without decoding them. The AVX-512 tiers (AMX's included: its AMX-BF16 tiles
// need the keys decoded, 2.8 ms at 16K keys against VNNI's 0.78) use VPDPBUSD where the CPU has VNNI and
// VBMI (indexer_int8_avx512.cc), else AVX2's integer path, which every AVX-512 CPU can run (Skylake-SP,
// Cascade Lake: no VBMI). kNone: decode the keys for the tier's float loop.
enum class PackedPath { kNone, kAvx2Ints, kVnni };
PackedPath packed_path(Isa resolved) {
  switch (resolved) {
    case Isa::kAvx2:
      return PackedPath::kAvx2Ints;
    case Isa::kAvx512:
    case Isa::kAvx512Bf16:
    case Isa::kAmx:
      return has_avx512_vnni_vbmi() ? PackedPath::kVnni : PackedPath::kAvx2Ints;
    default:
      return PackedPath::kNone;
  }
}
bool packed_on_vnni(Isa resolved) {
  return packed_path(resolved) == PackedPath::kVnni;
}

}  // namespace

void indexer_scores(const float* q, int64_t n_heads, int64_t head_dim, const float* keys, int64_t n_keys,
                    const float* w, float* scores, const AttentionOptions& opt) {
  DSV4_CHECK(n_heads > 0 && head_dim > 0 && n_keys >= 0, "indexer_scores: bad shape");
  if (n_keys == 0) return;
  const auto fn = detail::indexer_scores_for(resolve_isa(opt.isa));
  const int64_t grain = score_grain(n_heads, head_dim);
  if (!opt.pool || opt.pool->n_slots(n_keys, grain) <= 1) {
    fn(q, n_heads, head_dim, keys, 0, n_keys, w, scores);
    return;
  }
  opt.pool->parallel_for(n_keys, grain,
                         [&](int64_t k0, int64_t k1, int) { fn(q, n_heads, head_dim, keys, k0, k1, w, scores); });
}

bool indexer_reads_packed_keys(Isa isa) {
  const Isa resolved = resolve_isa(isa);
  return packed_path(resolved) != PackedPath::kNone;
}

namespace {

// One pool chunk of packed-key scores, keys [k0, k1) (k0 a multiple of 32); `prepared`: the VNNI path's
// converted groups of the whole key set, or nullptr.
void packed_chunk(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                  const IndexerKeyLine* prepared, int64_t k0, int64_t k1, const float* w, float* scores, Isa isa) {
  const auto fn = detail::indexer_scores_for(isa);
#if defined(__x86_64__)
  const PackedPath path = packed_path(isa);
  // The AVX2 tier's fn is its integer path on fp32 keys: a key the packed path refuses goes to the float loop.
  if (path == PackedPath::kAvx2Ints &&
      detail::indexer_scores_packed_avx2(q, n_heads, head_dim, keys, k0, k1, w, scores,
                                         isa == Isa::kAvx2 ? detail::indexer_scores_avx2_fp32 : fn))
    return;
  if (path == PackedPath::kVnni) {
    const bool done =
        prepared
            ? detail::indexer_scores_prepared_avx512vnni(q, n_heads, head_dim, keys, prepared, k0, k1, w, scores, fn)
            : detail::indexer_scores_packed_avx512vnni(q, n_heads, head_dim, keys, k0, k1, w, scores, fn);
    if (done) return;
  }
#else
  (void)prepared;
#endif
  constexpr int64_t kSlice = 256;  // keys decoded at a time (128 KiB at head_dim 128: stays in L2)
  const int64_t key_bytes = index_key_bytes(head_dim);
  thread_local std::vector<float> buf;
  if (buf.size() < static_cast<size_t>(kSlice * head_dim)) buf.resize(static_cast<size_t>(kSlice * head_dim));
  for (int64_t s0 = k0; s0 < k1; s0 += kSlice) {
    const int64_t n = std::min(kSlice, k1 - s0);
    for (int64_t t = 0; t < n; ++t)
      decode_index_key({keys[s0 + t], static_cast<size_t>(key_bytes)},
                       {buf.data() + t * head_dim, static_cast<size_t>(head_dim)});
    fn(q, n_heads, head_dim, buf.data(), 0, n, w, scores + s0);
  }
}

void packed_scores(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                   const IndexerKeyLine* prepared, int64_t n_keys, const float* w, float* scores,
                   const AttentionOptions& opt) {
  const Isa isa = resolve_isa(opt.isa);
  const int64_t grain = score_grain(n_heads, head_dim);
  if (!opt.pool || opt.pool->n_slots(n_keys, grain) <= 1)
    return packed_chunk(q, n_heads, head_dim, keys, prepared, 0, n_keys, w, scores, isa);
  opt.pool->parallel_for(n_keys, grain, [&](int64_t k0, int64_t k1, int) {
    packed_chunk(q, n_heads, head_dim, keys, prepared, k0, k1, w, scores, isa);
  });
}

}  // namespace

void indexer_scores_packed(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                           int64_t n_keys, const float* w, float* scores, const AttentionOptions& opt) {
  DSV4_CHECK(n_heads > 0 && head_dim > 0 && head_dim % kIndexKeyBlock == 0 && n_keys >= 0,
             "indexer_scores_packed: bad shape");
  if (n_keys == 0) return;
  packed_scores(q, n_heads, head_dim, keys, nullptr, n_keys, w, scores, opt);
}

int64_t indexer_prepared_lines(int64_t n_keys, int64_t head_dim, Isa isa) {
#if defined(__x86_64__)
  if (n_keys > 0 && head_dim > 0 && head_dim % kIndexKeyBlock == 0 && packed_on_vnni(resolve_isa(isa)))
    return detail::indexer_prepared_lines_avx512vnni(n_keys, head_dim);
#else
  (void)n_keys, (void)head_dim, (void)isa;
#endif
  return 0;
}

void indexer_prepare_packed(const uint8_t* const* keys, int64_t n_keys, int64_t head_dim, IndexerKeyLine* lines,
                            const AttentionOptions& opt) {
  DSV4_CHECK(indexer_prepared_lines(n_keys, head_dim, opt.isa) > 0,
             "indexer_prepare_packed: this ISA / head_dim has no prepared form (indexer_prepared_lines)");
#if defined(__x86_64__)
  constexpr int64_t kGrain = 256;  // whole 16-key groups; ~100 us of conversion at head_dim 128
  if (!opt.pool || opt.pool->n_slots(n_keys, kGrain) <= 1)
    return detail::indexer_prepare_packed_avx512vnni(keys, head_dim, 0, n_keys, lines);
  opt.pool->parallel_for(n_keys, kGrain, [&](int64_t k0, int64_t k1, int) {
    detail::indexer_prepare_packed_avx512vnni(keys, head_dim, k0, k1, lines);
  });
#endif
}

void indexer_scores_prepared(const float* q, int64_t n_heads, int64_t head_dim, const uint8_t* const* keys,
                             const IndexerKeyLine* lines, int64_t n_prepared, int64_t n_visible, const float* w,
                             float* scores, const AttentionOptions& opt) {
  DSV4_CHECK(n_heads > 0 && head_dim > 0 && head_dim % kIndexKeyBlock == 0 && n_visible >= 0 &&
                 n_visible <= n_prepared && lines != nullptr && packed_on_vnni(resolve_isa(opt.isa)),
             "indexer_scores_prepared: bad shape, more keys than prepared, or an ISA without the prepared form");
  if (n_visible == 0) return;
  packed_scores(q, n_heads, head_dim, keys, lines, n_visible, w, scores, opt);
}

namespace {

// Order-preserving image of a float: a > b ⇔ key(a) > key(b), and −0 == +0 map to one key (the
// reference compares with `>`, under which they tie).
// Branch-free (a select and a sign mask), so the compiler vectorizes the first pass.
inline uint32_t order_key(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  u = (u << 1) == 0 ? 0u : u;                                                // −0 → +0
  const auto neg = static_cast<uint32_t>(static_cast<int32_t>(u) >> 31);  // all ones when negative
  return u ^ (neg | 0x80000000u);                                            // ~u, or u with the top bit set
}

}  // namespace

void topk_desc(const float* scores, int64_t n, int64_t k, int32_t* out, TopkScratch& scratch) {
  DSV4_CHECK(k >= 0 && k <= n, "topk_desc: k out of range");
  if (k == 0) return;
  auto& key = scratch.keys;
  key.resize(static_cast<size_t>(n));
  // Radix select of the k-th largest key, 12 + 12 + 8 bits from the top. Only the first two passes read all
  // n keys (the top digit's histogram, then the split by it); each later digit is decided among the keys
  // still tied with the threshold so far, kept in index order. The top digit is 12 bits (sign, exponent,
  // 3 mantissa bits) because scores crowd into a binade or two: an 8-bit digit (sign and 7 exponent bits)
  // left nearly all n tied after it, so every later pass read them all again (16K scores ~ N(5, 1), top-512:
  // 61 us with an 8-bit top digit, 30-31 with these).
  // Two interleaved histograms: one counter would make every increment of a crowded bucket wait for the
  // previous one's store.
  constexpr int kDigitBits[3] = {12, 12, 8};
  constexpr int kTopShift = 32 - kDigitBits[0];
  constexpr int64_t kBuckets = int64_t{1} << kDigitBits[0];  // also the later digits' histogram size
  static_assert(kDigitBits[1] <= kDigitBits[0] && kDigitBits[2] <= kDigitBits[0], "later digits reuse h0");
  auto& hist2 = scratch.hist;
  hist2.assign(static_cast<size_t>(2 * kBuckets), 0);
  uint32_t* h0 = hist2.data();
  uint32_t* h1 = h0 + kBuckets;
  int64_t i = 0;
  for (; i + 2 <= n; i += 2) {
    const uint32_t a = order_key(scores[i]), b = order_key(scores[i + 1]);
    key[static_cast<size_t>(i)] = a;
    key[static_cast<size_t>(i + 1)] = b;
    ++h0[a >> kTopShift];
    ++h1[b >> kTopShift];
  }
  for (; i < n; ++i) {
    const uint32_t a = order_key(scores[i]);
    key[static_cast<size_t>(i)] = a;
    ++h0[a >> kTopShift];
  }
  int64_t need = k;  // how many of the keys tied with the threshold so far still belong to the top k
  int64_t b = kBuckets - 1;
  for (; b > 0 && need > static_cast<int64_t>(h0[b] + h1[b]); --b) need -= h0[b] + h1[b];
  auto& picked = scratch.picked;  // certainly in the top k (any order: sorted below)
  auto& tied = scratch.tied;      // equal to the threshold in every digit decided so far, in index order
  // Each split writes its index to both lists and advances one by the comparison: fewer than k keys lie
  // above the threshold (at least one belongs to it), so picked's writes stay below k; tied may take all n.
  picked.resize(static_cast<size_t>(k));
  tied.resize(static_cast<size_t>(n));
  size_t n_picked = 0, n_tied = 0;
  for (int64_t j = 0; j < n; ++j) {  // branchless: a key near the threshold would mispredict either way
    const uint32_t top = key[static_cast<size_t>(j)] >> kTopShift;
    picked[n_picked] = static_cast<int32_t>(j);
    n_picked += top > static_cast<uint32_t>(b);
    tied[n_tied] = static_cast<int32_t>(j);
    n_tied += top == static_cast<uint32_t>(b);
  }
  int shift = kTopShift;
  for (int d = 1; d < 3 && need < static_cast<int64_t>(n_tied); ++d) {
    shift -= kDigitBits[d];
    const uint32_t mask = (uint32_t{1} << kDigitBits[d]) - 1u;
    std::fill(h0, h0 + (int64_t{1} << kDigitBits[d]), 0u);
    for (size_t t = 0; t < n_tied; ++t) ++h0[(key[static_cast<size_t>(tied[t])] >> shift) & mask];
    b = static_cast<int64_t>(mask);
    for (; b > 0 && need > static_cast<int64_t>(h0[b]); --b) need -= h0[b];
    size_t kept = 0;
    for (size_t t = 0; t < n_tied; ++t) {
      const int32_t j = tied[t];
      const uint32_t digit = (key[static_cast<size_t>(j)] >> shift) & mask;
      picked[n_picked] = j;
      n_picked += digit > static_cast<uint32_t>(b);
      tied[kept] = j;  // in place: kept <= t
      kept += digit == static_cast<uint32_t>(b);
    }
    n_tied = kept;
  }
  // The first `need` of the keys equal to the threshold in index order (the tie rule).
  for (int64_t t = 0; t < need; ++t) picked[n_picked++] = tied[static_cast<size_t>(t)];
  DSV4_CHECK(static_cast<int64_t>(n_picked) == k, "topk_desc: selection count");
  // Descending key, then ascending index: one 64-bit comparison of key << 32 | ~index.
  auto& order = scratch.order;
  order.resize(n_picked);
  for (size_t j = 0; j < n_picked; ++j) {
    const auto idx = static_cast<uint32_t>(picked[j]);
    order[j] = (static_cast<uint64_t>(key[idx]) << 32) | ~idx;
  }
  std::sort(order.begin(), order.end(), [](uint64_t x, uint64_t y) { return x > y; });
  for (size_t j = 0; j < order.size(); ++j) out[j] = static_cast<int32_t>(~static_cast<uint32_t>(order[j]));
}

}  // namespace dsv4::kernels
