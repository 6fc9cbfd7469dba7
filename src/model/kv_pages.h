// model: paged, reference-counted storage of every kind of per-sequence state (spec §4): compressed KV
// rows, indexer keys, window rows and compressor partial-block rows. A KvPagePool holds fixed-size pages
// of `page_rows` rows, each row stored in the FP8 layout of core/kv_row.h (lossless on the reference's
// QAT grid), packed FP4 (indexer keys) or raw fp32. Pools draw their pages from one PageBudget (bytes),
// so one limit covers all of a model's state. A KvPageTable is one stream of rows of one sequence: a
// list of pages, appended to, truncated, copied by sharing, and optionally sliding (pages whose rows are
// all dead are released as it grows: window rings, partial blocks).
//
// Sharing is copy-on-write: copying a table retains every page (no row is copied); the first append
// into a last page that someone else also holds copies that page's rows to a fresh page first. Full
// pages are therefore immutable once shared, and a page is only written by the one table that holds it,
// which lets the sequences of a batch append on separate threads. Pool bookkeeping is under a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "core/kv_row.h"

namespace dsv4 {

enum class KvStorage {
  kFp8,  // core/kv_row.h layout: 584 bytes per official 512-dim row
  kFp4,  // indexer keys, core/kv_row.h: 68 bytes per 128-dim key (layout.rope_dims unused)
  kF32,  // dims × 4 bytes, stored verbatim (the reference's own precision; partial blocks, tests)
};

inline constexpr int32_t kKvPageRows = 64;

class KvPagePool;

// A byte limit shared by several pools: a page counts from allocation until its last holder releases it.
// Thread-safe. The pools drawing on it register themselves, so that setting a limit can reach the memory
// they cache.
class PageBudget {
 public:
  explicit PageBudget(int64_t max_bytes = 0) : max_bytes_(max_bytes) {}
  // 0 = unlimited. A limit frees the memory of every page the pools cached while unlimited (under a limit
  // a released page is never cached), so the bytes held come down to the bytes in use at once, not when
  // the cached pages are next reused. Lowering it below the bytes in use refuses further pages until
  // enough are released.
  void set_max_bytes(int64_t max_bytes);
  int64_t max_bytes() const;
  int64_t bytes_in_use() const;
  int64_t available_bytes() const;  // INT64_MAX when unlimited
  bool try_take(int64_t bytes);
  void give_back(int64_t bytes);

 private:
  friend class KvPagePool;  // attach/detach
  void attach(KvPagePool* pool);
  void detach(KvPagePool* pool);

  mutable std::mutex mu_;
  int64_t max_bytes_ = 0;
  int64_t in_use_ = 0;
  // Lock order: pools_mu_, then a pool's mutex, then mu_ (a pool allocating holds its own, then mu_).
  std::mutex pools_mu_;
  std::vector<KvPagePool*> pools_;
};

struct KvPoolStats {
  int64_t page_bytes = 0;
  int64_t pages_in_use = 0;   // pages some table holds (refcount > 0)
  int64_t pages_created = 0;  // pages whose memory the pool holds (in use + cached for reuse)
  int64_t max_pages = 0;      // the budget in this pool's pages; 0 = unlimited
  int64_t bytes_in_use() const { return pages_in_use * page_bytes; }
  int64_t bytes_held() const { return pages_created * page_bytes; }
};

class KvPagePool {
 public:
  // Pages come from `budget` (shared with other pools; null = unlimited). Created on demand, reused
  // once released.
  KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows, std::shared_ptr<PageBudget> budget);
  // A pool with a budget of its own: `max_bytes` 0 = grow without limit.
  KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows = kKvPageRows, int64_t max_bytes = 0);
  ~KvPagePool();
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvRowLayout& layout() const { return layout_; }
  KvStorage storage() const { return storage_; }
  int64_t row_bytes() const { return row_bytes_; }
  int32_t page_rows() const { return page_rows_; }
  int64_t page_bytes() const { return row_bytes_ * page_rows_; }
  const PageBudget& budget() const { return *budget_; }

  // row: [dims] floats <-> [row_bytes] stored bytes.
  void encode(const float* row, uint8_t* dst) const;
  void decode(const uint8_t* src, float* row) const;

  // A fresh page with refcount 1 (its memory stays valid until its last holder releases it), or false
  // when the budget is spent. Under a byte limit a released page's memory is freed, so the bytes held
  // never exceed the limit (unless it is lowered below the bytes in use); unlimited, it is kept for
  // reuse. Thread-safe, like retain/release/refcount/available_pages/stats.
  bool allocate(int32_t* id, uint8_t** data);
  void retain(int32_t id);
  void release(int32_t id);
  int32_t refcount(int32_t id) const;
  int64_t available_pages() const;  // pages the budget still allows (INT64_MAX when unlimited)
  KvPoolStats stats() const;

 private:
  friend class PageBudget;
  // Frees the memory of every page no table holds (their ids stay free for reuse). Thread-safe.
  void free_cached_pages();

  const KvRowLayout layout_;
  const KvStorage storage_;
  const int32_t page_rows_;
  const int64_t row_bytes_;
  const std::shared_ptr<PageBudget> budget_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<uint8_t[]>> pages_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // ids with refcount 0 (their memory cached, or freed under a limit)
  int64_t in_use_ = 0;
  int64_t held_ = 0;  // ids whose memory is allocated
};

// Which rows of a table stay alive as it grows. After n rows have been appended, rows below
// keep_from(n) are dead and every page holding only dead rows goes back to the pool:
//   align == 0: nothing dies (compressed rows and keys grow with the sequence);
//   else keep_from(n) = max(0, ⌊(n − 1) / align⌋·align − lag).
// Window of W rows: align 1, lag W − 1 (the last W rows). Compressor partial rows of ratio r: align r,
// lag r with overlap (the open block and the previous one), lag 0 without (the open block only).
struct SlidePolicy {
  int64_t align = 0;
  int64_t lag = 0;
  int64_t keep_from(int64_t n_rows) const;
};

class KvPageTable {
 public:
  KvPageTable() = default;
  explicit KvPageTable(std::shared_ptr<KvPagePool> pool, SlidePolicy slide = {})
      : pool_(std::move(pool)), slide_(slide) {}
  // Copies share every page (copy-on-write); moves transfer them.
  KvPageTable(const KvPageTable& other);
  KvPageTable& operator=(const KvPageTable& other);
  KvPageTable(KvPageTable&& other) noexcept;
  KvPageTable& operator=(KvPageTable&& other) noexcept;
  ~KvPageTable() { release_all(); }

  bool bound() const { return pool_ != nullptr; }
  const KvPagePool& pool() const { return *pool_; }
  const SlidePolicy& slide() const { return slide_; }
  int64_t size() const { return n_rows_; }  // rows ever appended (absolute row numbers)
  int64_t first_row() const;                // first row still held (0 unless sliding)
  int64_t n_pages() const { return static_cast<int64_t>(ids_.size()); }  // pages held
  int32_t page_id(int64_t p) const { return ids_[static_cast<size_t>(p)]; }  // p-th held page

  // Appends one row [dims]: first releases the pages the slide policy lets go, then writes. The budget
  // must allow it (pages_needed() said so): an exhausted pool here is a broken invariant.
  void append(std::span<const float> row);
  // Row first_row() <= i < size() decoded into out [dims].
  void read(int64_t i, float* out) const;
  // kF32 storage only: row i in place, [dims] floats (valid until the table next changes).
  const float* row_f32(int64_t i) const;
  // Row i's stored bytes in place, pool().row_bytes() of them, in its storage's encoding (kFp4: a
  // core/kv_row.h index key); valid until the table next changes.
  const uint8_t* row_bytes(int64_t i) const;
  // Keeps the first n rows (first_row() <= n <= size()); pages past them go back to the pool.
  void truncate(int64_t n);
  void clear();
  // Peak number of pages the pool must hand out while this table grows to `n_rows`: fresh pages and a
  // copy-on-write copy, net of the pages the slide policy frees on the way (pages only this table holds).
  int64_t pages_needed(int64_t n_rows) const;

 private:
  void release_all();
  void release_dead(int64_t n_rows);

  std::shared_ptr<KvPagePool> pool_;
  SlidePolicy slide_;
  std::vector<int32_t> ids_;
  std::vector<uint8_t*> data_;  // page memory, cached so reads never touch the pool's (locked) lists
  int64_t first_page_ = 0;      // absolute page number of ids_[0]
  int64_t n_rows_ = 0;
};

}  // namespace dsv4
