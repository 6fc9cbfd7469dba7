// tokenizer: MergeTable growth and WordCache slots (see bpe_tables.h).
#include "tokenizer/bpe_tables.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>

namespace dsv4::tok {

void MergeTable::reserve(size_t n) {
  // Load factor at most 1/2: linear probing stays short.
  const size_t want = std::bit_ceil(std::max<size_t>(16, 2 * n));
  if (want > slots_.size()) rehash(want);
}

void MergeTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  for (const Slot& s : old) {
    if (s.key == kEmpty) continue;
    size_t i = slot_of(s.key);
    while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void MergeTable::insert_or_assign(int32_t left, int32_t right, MergeInfo info) {
  if (2 * (size_ + 1) > slots_.size()) rehash(2 * slots_.size());
  const uint64_t key = pack(left, right);
  size_t i = slot_of(key);
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i] = Slot{key, info};
}

uint64_t WordCache::hash(std::string_view word) {
  return std::hash<std::string_view>{}(word);
}

bool WordCache::entry_matches(const Slot& s, uint32_t tag, std::string_view word) const {
  if (s.tag != tag) return false;
  const unsigned char* e = arena_.data() + (s.offset - 1);
  uint16_t len;
  std::memcpy(&len, e, 2);
  return len == word.size() && std::memcmp(e + 4, word.data(), len) == 0;
}

bool WordCache::lookup(std::string_view word, uint64_t h, std::vector<int32_t>& out) const {
  if (word.empty() || word.size() > kMaxWordBytes) return false;
  const auto tag = static_cast<uint32_t>(h >> 32);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = h & (kIndexSlots - 1);; i = (i + 1) & (kIndexSlots - 1)) {
    const Slot& s = index_[i];
    if (s.offset == 0) return false;
    if (!entry_matches(s, tag, word)) continue;
    const unsigned char* e = arena_.data() + (s.offset - 1);
    uint16_t n_ids;
    std::memcpy(&n_ids, e + 2, 2);
    const size_t ids_at = 4 + ((word.size() + 3u) & ~size_t{3});
    const size_t n0 = out.size();
    out.resize(n0 + n_ids);
    std::memcpy(out.data() + n0, e + ids_at, n_ids * sizeof(int32_t));
    return true;
  }
}

void WordCache::store(std::string_view word, uint64_t h, const int32_t* ids, size_t n_ids) {
  if (word.empty() || word.size() > kMaxWordBytes) return;  // n_ids <= word bytes: fits a u16
  const size_t ids_at = 4 + ((word.size() + 3u) & ~size_t{3});
  const size_t bytes = ids_at + n_ids * sizeof(int32_t);
  std::lock_guard<std::mutex> lock(mu_);
  if (arena_.size() + bytes > kArenaBytes || 2 * (n_entries_ + 1) > kIndexSlots) clear_locked();
  const auto tag = static_cast<uint32_t>(h >> 32);
  size_t i = h & (kIndexSlots - 1);
  for (;; i = (i + 1) & (kIndexSlots - 1)) {
    const Slot& s = index_[i];
    if (s.offset == 0) break;
    if (entry_matches(s, tag, word)) return;  // another thread stored it since our lookup
  }
  const size_t at = arena_.size();
  arena_.resize(at + bytes);
  unsigned char* e = arena_.data() + at;
  const auto len16 = static_cast<uint16_t>(word.size()), n16 = static_cast<uint16_t>(n_ids);
  std::memcpy(e, &len16, 2);
  std::memcpy(e + 2, &n16, 2);
  std::memcpy(e + 4, word.data(), word.size());
  std::memcpy(e + ids_at, ids, n_ids * sizeof(int32_t));
  index_[i] = Slot{tag, static_cast<uint32_t>(at + 1)};
  ++n_entries_;
}

void WordCache::clear_locked() {
  std::fill(index_.begin(), index_.end(), Slot{});
  arena_.clear();
  n_entries_ = 0;
}

}  // namespace dsv4::tok
