// tokenizer: the in-memory form of a tokenizer.json (internal to the tokenizer library).
// Built and validated by tokenizer_load.cc, used read-only by encode/decode in tokenizer.cc; the only
// mutable part is the word cache, behind its own mutex, so one Tokenizer serves many threads.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe_tables.h"

namespace dsv4::tok {

// A compiled PCRE2 pattern (UTF + UCP, JIT when the platform has it).
class Regex {
 public:
  Regex() = default;
  explicit Regex(pcre2_code* code) : code_(code) {}
  Regex(Regex&& o) noexcept : code_(o.code_) { o.code_ = nullptr; }
  Regex& operator=(Regex&& o) noexcept {
    std::swap(code_, o.code_);
    return *this;
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() {
    if (code_) pcre2_code_free(code_);
  }
  pcre2_code* get() const { return code_; }

 private:
  pcre2_code* code_ = nullptr;
};

// HF SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct SplitStep {
  Regex regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
};

// Byte trie over added-token contents, for leftmost-longest matching (HF's aho-corasick
// MatchKind::LeftmostLongest gives the same result: earliest start, then longest).
class TokenTrie {
 public:
  TokenTrie() { nodes_.emplace_back(); }
  void insert(std::string_view s, int32_t id);
  bool empty() const { return nodes_.size() == 1; }
  bool may_start(unsigned char c) const { return first_[c]; }
  // Longest token that `s` starts with: its length and id, or {0, -1}.
  std::pair<size_t, int32_t> longest_prefix(std::string_view s) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token = -1;
  };
  std::vector<Node> nodes_;
  std::array<bool, 256> first_{};
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct TokenizerModel {
  // Indexed by id; entries with empty text are gaps in the id space.
  std::vector<std::string> id_to_text;   // the string in tokenizer.json
  std::vector<std::string> id_to_bytes;  // what the id decodes to
  std::vector<uint8_t> id_flags;         // kAdded | kSpecial
  static constexpr uint8_t kAdded = 1, kSpecial = 2;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> text_to_id;

  std::array<int32_t, 256> byte_to_id{};  // single-byte tokens: BPE's starting symbols
  MergeTable merges;                      // (left id, right id) → rank, result
  bool ignore_merges = false;             // HF BPE option: whole word in vocab wins
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> bytes_to_id;  // ignore_merges only

  std::vector<SplitStep> splits;  // the pre-tokenizer's Split steps, in order
  bool byte_level_add_prefix_space = false;
  bool byte_level_use_regex = false;  // ByteLevel's own GPT-2 split (then `gpt2_regex` is set)
  Regex gpt2_regex;

  // Added tokens: HF matches the non-normalized ones on the raw text first, then the normalized
  // ones on what is left (the normalizer is the identity for this family).
  TokenTrie added_raw;
  TokenTrie added_normalized;

  // Word cache: recent short pre-tokens → ids.
  mutable WordCache cache;
};

// GPT-2's ByteLevel mapping: the printable stand-in for each byte, as a code point.
uint32_t byte_level_char(uint8_t b);

}  // namespace dsv4::tok
