// tokenizer: the BPE's two hot lookup structures (internal to the tokenizer library). MergeTable maps
// an adjacent pair of ids to its merge (open addressing over one flat array, so a lookup is one or two
// cache lines and no allocation); WordCache remembers the ids of the pre-tokens seen (entries packed
// in one arena, so storing a word allocates nothing once the arena has grown).
#pragma once

#include <cstdint>
#include <mutex>
#include <string_view>
#include <vector>

namespace dsv4::tok {

struct MergeInfo {
  int32_t rank;
  int32_t new_id;
};

class MergeTable {
 public:
  MergeTable() { rehash(16); }
  void reserve(size_t n);
  // Sets the merge of (left, right); a repeated pair keeps the later value, as HF does.
  void insert_or_assign(int32_t left, int32_t right, MergeInfo info);
  // The merge of (left, right), or nullptr. Ids are non-negative.
  const MergeInfo* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.info;
      if (s.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // no pair of non-negative int32 ids packs to this
  struct Slot {
    uint64_t key = kEmpty;
    MergeInfo info{};
  };
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Fibonacci hashing: the top bits of key * 2^64/phi spread consecutive ids over the table.
  size_t slot_of(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void rehash(size_t capacity);  // capacity: a power of two

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 255;  // longer pre-tokens are not cached

  static uint64_t hash(std::string_view word);
  // Appends the cached ids of `word` to `out` and returns true, or returns false (a miss).
  bool lookup(std::string_view word, uint64_t h, std::vector<int32_t>& out) const;
  void store(std::string_view word, uint64_t h, const int32_t* ids, size_t n_ids);

 private:
  // Entries live back to back in one arena ([u16 word bytes][u16 n_ids][word, padded to 4][ids]); an
  // open-addressing index of (hash tag, arena offset) finds them. When the arena or the index is full
  // the whole cache is dropped at once (two buffers reset, no per-entry frees).
  static constexpr size_t kIndexSlots = 1 << 17;  // at most half used: 65536 words
  static constexpr size_t kArenaBytes = 4 << 20;
  struct Slot {
    uint32_t tag = 0;     // high half of the word's hash
    uint32_t offset = 0;  // arena offset + 1; 0 = empty
  };
  bool entry_matches(const Slot& s, uint32_t tag, std::string_view word) const;
  void clear_locked();

  mutable std::mutex mu_;  // one lock: a lookup is tens of nanoseconds, so contention stays low
  std::vector<Slot> index_ = std::vector<Slot>(kIndexSlots);
  std::vector<unsigned char> arena_;
  size_t n_entries_ = 0;
};

}  // namespace dsv4::tok
