// model: paged storage of the compressed KV rows (spec §4), the state that grows with the sequence.
// A KvPagePool holds fixed-size pages of `page_rows` rows, each row stored in the FP8 layout of
// core/kv_row.h (lossless on the reference's QAT grid) or, for comparison, as raw fp32. One pool serves
// every sequence of a model; pages carry reference counts so sequences can share a prefix. A KvPageTable
// is one compressor's rows of one sequence: a list of pages, appended to, truncated, copied by sharing.
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
  kF32,  // dims × 4 bytes, stored verbatim (the reference's own precision; for tests and comparison)
};

inline constexpr int32_t kKvPageRows = 64;

struct KvPoolStats {
  int64_t page_bytes = 0;
  int64_t pages_in_use = 0;   // pages some table holds (refcount > 0)
  int64_t pages_created = 0;  // pages whose memory the pool holds (in use + free for reuse)
  int64_t max_pages = 0;      // budget in pages; 0 = unlimited
  int64_t bytes_in_use() const { return pages_in_use * page_bytes; }
  int64_t bytes_held() const { return pages_created * page_bytes; }
};

class KvPagePool {
 public:
  // `max_bytes` 0 = grow without limit. Pages are created on demand and reused once released.
  KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows = kKvPageRows, int64_t max_bytes = 0);
  KvPagePool(const KvPagePool&) = delete;
  KvPagePool& operator=(const KvPagePool&) = delete;

  const KvRowLayout& layout() const { return layout_; }
  KvStorage storage() const { return storage_; }
  int64_t row_bytes() const { return row_bytes_; }
  int32_t page_rows() const { return page_rows_; }
  int64_t page_bytes() const { return row_bytes_ * page_rows_; }

  // row: [dims] floats <-> [row_bytes] stored bytes.
  void encode(const float* row, uint8_t* dst) const;
  void decode(const uint8_t* src, float* row) const;

  // A fresh page with refcount 1 (its memory stays valid until the pool dies), or false when the budget
  // is spent. Thread-safe, like retain/release/refcount/available_pages/stats.
  bool allocate(int32_t* id, uint8_t** data);
  void retain(int32_t id);
  void release(int32_t id);
  int32_t refcount(int32_t id) const;
  int64_t available_pages() const;  // pages allocate() can still hand out (INT64_MAX when unlimited)
  KvPoolStats stats() const;

 private:
  const KvRowLayout layout_;
  const KvStorage storage_;
  const int32_t page_rows_;
  const int64_t row_bytes_;
  const int64_t max_pages_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<uint8_t[]>> pages_;
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;
  int64_t in_use_ = 0;
};

class KvPageTable {
 public:
  KvPageTable() = default;
  explicit KvPageTable(std::shared_ptr<KvPagePool> pool) : pool_(std::move(pool)) {}
  // Copies share every page (copy-on-write); moves transfer them.
  KvPageTable(const KvPageTable& other);
  KvPageTable& operator=(const KvPageTable& other);
  KvPageTable(KvPageTable&& other) noexcept;
  KvPageTable& operator=(KvPageTable&& other) noexcept;
  ~KvPageTable() { clear(); }

  bool bound() const { return pool_ != nullptr; }
  const KvPagePool& pool() const { return *pool_; }
  int64_t size() const { return n_rows_; }
  int64_t n_pages() const { return static_cast<int64_t>(ids_.size()); }
  int32_t page_id(int64_t p) const { return ids_[static_cast<size_t>(p)]; }

  // Appends one row [dims]. The pool's budget must allow it (pages_needed() said so): an exhausted
  // pool here is a broken invariant, not a recoverable error.
  void append(std::span<const float> row);
  // Row i < size() decoded into out [dims].
  void read(int64_t i, float* out) const;
  // Keeps the first n <= size() rows; pages past them go back to the pool.
  void truncate(int64_t n);
  void clear() { truncate(0); }
  // Pages the pool must hand out for this table to grow to `n_rows` (including a copy-on-write copy).
  int64_t pages_needed(int64_t n_rows) const;

 private:
  void release_all();

  std::shared_ptr<KvPagePool> pool_;
  std::vector<int32_t> ids_;
  std::vector<uint8_t*> data_;  // page memory, cached so reads never touch the pool's (locked) lists
  int64_t n_rows_ = 0;
};

}  // namespace dsv4
