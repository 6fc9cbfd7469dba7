// model: paged, reference-counted storage of compressed KV rows (see kv_pages.h).
#include "model/kv_pages.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace dsv4 {

KvPagePool::KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows, int64_t max_bytes)
    : layout_(layout),
      storage_(storage),
      page_rows_(page_rows),
      row_bytes_(storage == KvStorage::kFp8   ? layout.bytes()
                 : storage == KvStorage::kFp4 ? index_key_bytes(layout.dims)
                                              : layout.dims * 4),
      max_pages_(max_bytes > 0 ? std::max<int64_t>(1, max_bytes / (row_bytes_ * page_rows)) : 0) {
  DSV4_CHECK(page_rows > 0 &&
                 (storage == KvStorage::kFp4 ? layout.dims > 0 && layout.dims % kIndexKeyBlock == 0 : layout.valid()),
             "KvPagePool: bad row layout or page size");
}

void KvPagePool::encode(const float* row, uint8_t* dst) const {
  if (storage_ == KvStorage::kF32) {
    std::memcpy(dst, row, static_cast<size_t>(row_bytes_));
    return;
  }
  if (storage_ == KvStorage::kFp4) {
    encode_index_key({row, static_cast<size_t>(layout_.dims)}, {dst, static_cast<size_t>(row_bytes_)});
    return;
  }
  encode_kv_row(layout_, {row, static_cast<size_t>(layout_.dims)}, {dst, static_cast<size_t>(row_bytes_)});
}

void KvPagePool::decode(const uint8_t* src, float* row) const {
  if (storage_ == KvStorage::kF32) {
    std::memcpy(row, src, static_cast<size_t>(row_bytes_));
    return;
  }
  if (storage_ == KvStorage::kFp4) {
    decode_index_key({src, static_cast<size_t>(row_bytes_)}, {row, static_cast<size_t>(layout_.dims)});
    return;
  }
  decode_kv_row(layout_, {src, static_cast<size_t>(row_bytes_)}, {row, static_cast<size_t>(layout_.dims)});
}

bool KvPagePool::allocate(int32_t* id, uint8_t** data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_pages_ > 0 && in_use_ >= max_pages_) return false;
  if (free_.empty()) {
    DSV4_CHECK(pages_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()), "KvPagePool: too many pages");
    pages_.push_back(std::make_unique<uint8_t[]>(static_cast<size_t>(page_bytes())));
    refs_.push_back(0);
    free_.push_back(static_cast<int32_t>(pages_.size() - 1));
  }
  *id = free_.back();
  free_.pop_back();
  refs_[static_cast<size_t>(*id)] = 1;
  ++in_use_;
  *data = pages_[static_cast<size_t>(*id)].get();
  return true;
}

void KvPagePool::retain(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  DSV4_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size() && refs_[static_cast<size_t>(id)] > 0,
             "KvPagePool: retain of a free page");
  ++refs_[static_cast<size_t>(id)];
}

void KvPagePool::release(int32_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  DSV4_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size() && refs_[static_cast<size_t>(id)] > 0,
             "KvPagePool: release of a free page");
  if (--refs_[static_cast<size_t>(id)] == 0) {
    free_.push_back(id);
    --in_use_;
  }
}

int32_t KvPagePool::refcount(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  DSV4_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size(), "KvPagePool: bad page id");
  return refs_[static_cast<size_t>(id)];
}

int64_t KvPagePool::available_pages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_pages_ > 0 ? max_pages_ - in_use_ : std::numeric_limits<int64_t>::max();
}

KvPoolStats KvPagePool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {page_bytes(), in_use_, static_cast<int64_t>(pages_.size()), max_pages_};
}

// ---- KvPageTable ----

KvPageTable::KvPageTable(const KvPageTable& other)
    : pool_(other.pool_), ids_(other.ids_), data_(other.data_), n_rows_(other.n_rows_) {
  for (int32_t id : ids_) pool_->retain(id);
}

KvPageTable& KvPageTable::operator=(const KvPageTable& other) {
  if (this == &other) return *this;
  for (int32_t id : other.ids_) other.pool_->retain(id);  // before releasing ours: other may share them
  release_all();
  pool_ = other.pool_;
  ids_ = other.ids_;
  data_ = other.data_;
  n_rows_ = other.n_rows_;
  return *this;
}

KvPageTable::KvPageTable(KvPageTable&& other) noexcept
    : pool_(std::move(other.pool_)),
      ids_(std::move(other.ids_)),
      data_(std::move(other.data_)),
      n_rows_(other.n_rows_) {
  other.ids_.clear();
  other.data_.clear();
  other.n_rows_ = 0;
}

KvPageTable& KvPageTable::operator=(KvPageTable&& other) noexcept {
  if (this == &other) return *this;
  release_all();
  pool_ = std::move(other.pool_);
  ids_ = std::move(other.ids_);
  data_ = std::move(other.data_);
  n_rows_ = other.n_rows_;
  other.ids_.clear();
  other.data_.clear();
  other.n_rows_ = 0;
  return *this;
}

void KvPageTable::release_all() {
  for (int32_t id : ids_) pool_->release(id);
  ids_.clear();
  data_.clear();
  n_rows_ = 0;
}

void KvPageTable::append(std::span<const float> row) {
  DSV4_CHECK(pool_ && static_cast<int64_t>(row.size()) == pool_->layout().dims,
             "KvPageTable::append: unbound or bad row");
  const int64_t pr = pool_->page_rows();
  const int64_t slot = n_rows_ % pr;
  if (slot == 0 && n_rows_ / pr == n_pages()) {  // every page is full: a new one
    int32_t id = 0;
    uint8_t* data = nullptr;
    DSV4_CHECK(pool_->allocate(&id, &data), "KvPageTable::append: KV page pool exhausted (budget not checked first)");
    ids_.push_back(id);
    data_.push_back(data);
  } else if (pool_->refcount(ids_.back()) > 1) {
    // Copy-on-write: the last page is shared, so its first `slot` rows (ours) move to a private page.
    int32_t id = 0;
    uint8_t* data = nullptr;
    DSV4_CHECK(pool_->allocate(&id, &data), "KvPageTable::append: KV page pool exhausted (budget not checked first)");
    std::memcpy(data, data_.back(), static_cast<size_t>(slot * pool_->row_bytes()));
    pool_->release(ids_.back());
    ids_.back() = id;
    data_.back() = data;
  }
  pool_->encode(row.data(), data_.back() + slot * pool_->row_bytes());
  ++n_rows_;
}

void KvPageTable::read(int64_t i, float* out) const {
  DSV4_DCHECK(i >= 0 && i < n_rows_, "KvPageTable::read out of range");
  const int64_t pr = pool_->page_rows();
  pool_->decode(data_[static_cast<size_t>(i / pr)] + (i % pr) * pool_->row_bytes(), out);
}

void KvPageTable::truncate(int64_t n) {
  DSV4_CHECK(n >= 0 && n <= n_rows_, "KvPageTable::truncate past the end");
  if (!pool_) return;
  const int64_t keep = (n + pool_->page_rows() - 1) / pool_->page_rows();
  while (n_pages() > keep) {
    pool_->release(ids_.back());
    ids_.pop_back();
    data_.pop_back();
  }
  n_rows_ = n;
}

int64_t KvPageTable::pages_needed(int64_t n_rows) const {
  if (!pool_ || n_rows <= n_rows_) return 0;
  const int64_t pr = pool_->page_rows();
  const int64_t grow = (n_rows + pr - 1) / pr - n_pages();
  const bool cow = n_rows_ % pr != 0 && pool_->refcount(ids_.back()) > 1;
  return grow + (cow ? 1 : 0);
}

}  // namespace dsv4
