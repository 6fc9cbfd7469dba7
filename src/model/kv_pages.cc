// model: paged, reference-counted storage of per-sequence state rows (see kv_pages.h).
#include "model/kv_pages.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/check.h"

namespace dsv4 {

// ---- PageBudget ----

void PageBudget::set_max_bytes(int64_t max_bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    max_bytes_ = max_bytes;
  }
  if (max_bytes <= 0) return;
  // A page released from here on sees the limit and is freed (KvPagePool::release); the ones cached
  // before are freed now. mu_ is not held: each pool takes its own mutex, which allocate holds before mu_.
  std::lock_guard<std::mutex> lock(pools_mu_);
  for (KvPagePool* pool : pools_) pool->free_cached_pages();
}

void PageBudget::attach(KvPagePool* pool) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  pools_.push_back(pool);
}

void PageBudget::detach(KvPagePool* pool) {
  std::lock_guard<std::mutex> lock(pools_mu_);
  pools_.erase(std::remove(pools_.begin(), pools_.end(), pool), pools_.end());
}

int64_t PageBudget::max_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_bytes_;
}

int64_t PageBudget::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}

int64_t PageBudget::available_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return max_bytes_ > 0 ? std::max<int64_t>(0, max_bytes_ - in_use_) : std::numeric_limits<int64_t>::max();
}

bool PageBudget::try_take(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (max_bytes_ > 0 && in_use_ + bytes > max_bytes_) return false;
  in_use_ += bytes;
  return true;
}

void PageBudget::give_back(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  DSV4_CHECK(bytes <= in_use_, "PageBudget: more bytes given back than taken");
  in_use_ -= bytes;
}

// ---- KvPagePool ----

namespace {

int64_t row_bytes_of(const KvRowLayout& layout, KvStorage storage) {
  switch (storage) {
    case KvStorage::kFp8: return layout.bytes();
    case KvStorage::kFp4: return index_key_bytes(layout.dims);
    case KvStorage::kF32: return layout.dims * 4;
  }
  return 0;
}

bool layout_fits(const KvRowLayout& layout, KvStorage storage) {
  switch (storage) {
    case KvStorage::kFp8: return layout.valid();
    case KvStorage::kFp4: return layout.dims > 0 && layout.dims % kIndexKeyBlock == 0;
    case KvStorage::kF32: return layout.dims > 0;
  }
  return false;
}

}  // namespace

KvPagePool::KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows, std::shared_ptr<PageBudget> budget)
    : layout_(layout),
      storage_(storage),
      page_rows_(page_rows),
      row_bytes_(row_bytes_of(layout, storage)),
      budget_(budget ? std::move(budget) : std::make_shared<PageBudget>()) {
  DSV4_CHECK(page_rows > 0 && layout_fits(layout, storage), "KvPagePool: bad row layout or page size");
  budget_->attach(this);
}

KvPagePool::~KvPagePool() { budget_->detach(this); }

KvPagePool::KvPagePool(KvRowLayout layout, KvStorage storage, int32_t page_rows, int64_t max_bytes)
    : KvPagePool(layout, storage, page_rows, std::make_shared<PageBudget>(max_bytes)) {}

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
  if (!budget_->try_take(page_bytes())) return false;
  if (free_.empty()) {
    DSV4_CHECK(pages_.size() < static_cast<size_t>(std::numeric_limits<int32_t>::max()), "KvPagePool: too many pages");
    pages_.emplace_back();
    refs_.push_back(0);
    free_.push_back(static_cast<int32_t>(pages_.size() - 1));
  }
  *id = free_.back();
  free_.pop_back();
  std::unique_ptr<uint8_t[]>& page = pages_[static_cast<size_t>(*id)];
  if (!page) {  // a new id, or one whose memory went back to the system on release
    page = std::make_unique<uint8_t[]>(static_cast<size_t>(page_bytes()));
    ++held_;
  }
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
    // Under a byte limit the page's memory goes back to the system: a cached free page would still be
    // held, and caches of several pools (window, partials, rows, keys) could together hold more than
    // the limit once the mix of kinds shifts. Unlimited pools keep it for reuse.
    if (budget_->max_bytes() > 0) {
      pages_[static_cast<size_t>(id)].reset();
      --held_;
    }
    free_.push_back(id);
    --in_use_;
    budget_->give_back(page_bytes());
  }
}

void KvPagePool::free_cached_pages() {
  std::lock_guard<std::mutex> lock(mu_);
  for (int32_t id : free_) {
    std::unique_ptr<uint8_t[]>& page = pages_[static_cast<size_t>(id)];
    if (page) {
      page.reset();
      --held_;
    }
  }
}

int32_t KvPagePool::refcount(int32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  DSV4_CHECK(id >= 0 && static_cast<size_t>(id) < refs_.size(), "KvPagePool: bad page id");
  return refs_[static_cast<size_t>(id)];
}

int64_t KvPagePool::available_pages() const {
  const int64_t bytes = budget_->available_bytes();
  return bytes == std::numeric_limits<int64_t>::max() ? bytes : bytes / page_bytes();
}

KvPoolStats KvPagePool::stats() const {
  const int64_t max_bytes = budget_->max_bytes();
  std::lock_guard<std::mutex> lock(mu_);
  return {page_bytes(), in_use_, held_, max_bytes > 0 ? max_bytes / page_bytes() : 0};
}

// ---- SlidePolicy ----

int64_t SlidePolicy::keep_from(int64_t n_rows) const {
  if (align <= 0 || n_rows <= 0) return 0;
  return std::max<int64_t>(0, (n_rows - 1) / align * align - lag);
}

// ---- KvPageTable ----

KvPageTable::KvPageTable(const KvPageTable& other)
    : pool_(other.pool_),
      slide_(other.slide_),
      ids_(other.ids_),
      data_(other.data_),
      first_page_(other.first_page_),
      n_rows_(other.n_rows_) {
  for (int32_t id : ids_) pool_->retain(id);
}

KvPageTable& KvPageTable::operator=(const KvPageTable& other) {
  if (this == &other) return *this;
  for (int32_t id : other.ids_) other.pool_->retain(id);  // before releasing ours: other may share them
  release_all();
  pool_ = other.pool_;
  slide_ = other.slide_;
  ids_ = other.ids_;
  data_ = other.data_;
  first_page_ = other.first_page_;
  n_rows_ = other.n_rows_;
  return *this;
}

KvPageTable::KvPageTable(KvPageTable&& other) noexcept
    : pool_(std::move(other.pool_)),
      slide_(other.slide_),
      ids_(std::move(other.ids_)),
      data_(std::move(other.data_)),
      first_page_(other.first_page_),
      n_rows_(other.n_rows_) {
  other.ids_.clear();
  other.data_.clear();
  other.first_page_ = 0;
  other.n_rows_ = 0;
}

KvPageTable& KvPageTable::operator=(KvPageTable&& other) noexcept {
  if (this == &other) return *this;
  release_all();
  pool_ = std::move(other.pool_);
  slide_ = other.slide_;
  ids_ = std::move(other.ids_);
  data_ = std::move(other.data_);
  first_page_ = other.first_page_;
  n_rows_ = other.n_rows_;
  other.ids_.clear();
  other.data_.clear();
  other.first_page_ = 0;
  other.n_rows_ = 0;
  return *this;
}

void KvPageTable::release_all() {
  for (int32_t id : ids_) pool_->release(id);
  ids_.clear();
  data_.clear();
}

void KvPageTable::clear() {
  release_all();
  first_page_ = 0;
  n_rows_ = 0;
}

int64_t KvPageTable::first_row() const { return pool_ ? first_page_ * pool_->page_rows() : 0; }

void KvPageTable::release_dead(int64_t n_rows) {
  const int64_t keep = slide_.keep_from(n_rows), pr = pool_->page_rows();
  size_t dead = 0;
  while (dead < ids_.size() && (first_page_ + static_cast<int64_t>(dead) + 1) * pr <= keep) {
    pool_->release(ids_[dead]);
    ++dead;
  }
  if (dead == 0) return;
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<ptrdiff_t>(dead));
  data_.erase(data_.begin(), data_.begin() + static_cast<ptrdiff_t>(dead));
  first_page_ += static_cast<int64_t>(dead);
}

void KvPageTable::append(std::span<const float> row) {
  DSV4_CHECK(pool_ && static_cast<int64_t>(row.size()) == pool_->layout().dims,
             "KvPageTable::append: unbound or bad row");
  if (slide_.align > 0) release_dead(n_rows_ + 1);
  const int64_t pr = pool_->page_rows();
  const int64_t slot = n_rows_ % pr;
  if (ids_.empty()) first_page_ = n_rows_ / pr;  // everything before slid out (slot is 0 then)
  if (slot == 0 && n_rows_ / pr == first_page_ + n_pages()) {  // every held page is full: a new one
    int32_t id = 0;
    uint8_t* data = nullptr;
    DSV4_CHECK(pool_->allocate(&id, &data), "KvPageTable::append: page budget exhausted (not checked first)");
    ids_.push_back(id);
    data_.push_back(data);
  } else if (pool_->refcount(ids_.back()) > 1) {
    // Copy-on-write: the last page is shared, so its first `slot` rows (ours) move to a private page.
    int32_t id = 0;
    uint8_t* data = nullptr;
    DSV4_CHECK(pool_->allocate(&id, &data), "KvPageTable::append: page budget exhausted (not checked first)");
    std::memcpy(data, data_.back(), static_cast<size_t>(slot * pool_->row_bytes()));
    pool_->release(ids_.back());
    ids_.back() = id;
    data_.back() = data;
  }
  pool_->encode(row.data(), data_.back() + slot * pool_->row_bytes());
  ++n_rows_;
}

void KvPageTable::read(int64_t i, float* out) const { pool_->decode(row_bytes(i), out); }

const float* KvPageTable::row_f32(int64_t i) const {
  DSV4_DCHECK(pool_->storage() == KvStorage::kF32, "KvPageTable::row_f32 on a table that is not fp32");
  return reinterpret_cast<const float*>(row_bytes(i));
}

const uint8_t* KvPageTable::row_bytes(int64_t i) const {
  DSV4_DCHECK(i >= first_row() && i < n_rows_, "KvPageTable: row out of range");
  const int64_t pr = pool_->page_rows();
  return data_[static_cast<size_t>(i / pr - first_page_)] + (i % pr) * pool_->row_bytes();
}

void KvPageTable::truncate(int64_t n) {
  DSV4_CHECK(n >= first_row() && n <= n_rows_, "KvPageTable::truncate outside the held rows");
  if (!pool_) return;
  const int64_t keep = (n + pool_->page_rows() - 1) / pool_->page_rows() - first_page_;
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
  // Replays append()'s page events. A page this table alone holds returns to the pool when it slides
  // out; a shared one does not (its other holders keep it). Fresh pages are ours, and so is the one
  // shared page a copy-on-write replaces (only the last held page can be copied, at most once).
  const int64_t first0 = first_page_, end0 = first_page_ + n_pages();
  int64_t copied = -1;  // absolute page number made private by the replayed copy-on-write
  const auto is_owned = [&](int64_t page) {
    return page >= end0 || page == copied || pool_->refcount(ids_[static_cast<size_t>(page - first0)]) == 1;
  };
  int64_t first = first0, end = end0, net = 0, peak = 0;
  for (int64_t n = n_rows_; n < n_rows; ++n) {
    const int64_t keep = slide_.keep_from(n + 1);
    while (slide_.align > 0 && first < end && (first + 1) * pr <= keep) net -= is_owned(first++) ? 1 : 0;
    if (first == end) first = end = n / pr;
    if (n % pr == 0 && n / pr == end) {
      ++end;
      ++net;
    } else if (!is_owned(end - 1)) {  // copy-on-write of the shared last page
      copied = end - 1;
      ++net;
    }
    peak = std::max(peak, net);
  }
  return peak;
}

}  // namespace dsv4
