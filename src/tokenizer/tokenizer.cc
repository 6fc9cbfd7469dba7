// tokenizer: encode (added tokens → Split regexes → ByteLevel → ranked BPE) and decode, following
// Hugging Face tokenizers' semantics for byte-level BPE files (see tokenizer.h).
#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/tokenizer_model.h"
#include "tokenizer/utf8.h"

namespace dsv4 {
namespace tok {
namespace {

// Per-call PCRE2 state: match data and (only if a pattern ever needs it) a larger JIT stack.
class MatchScratch {
 public:
  MatchScratch() : md_(pcre2_match_data_create(1, nullptr)) {}
  ~MatchScratch() {
    pcre2_match_data_free(md_);
    if (mctx_) pcre2_match_context_free(mctx_);
    if (stack_) pcre2_jit_stack_free(stack_);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;

  // Finds the next match of `re` in `subject` at or after `start`; false when there is none.
  bool find(const Regex& re, std::string_view subject, size_t start, size_t& m_begin, size_t& m_end) {
    int rc = match(re, subject, start);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && stack_ == nullptr) {
      stack_ = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
      mctx_ = pcre2_match_context_create(nullptr);
      pcre2_jit_stack_assign(mctx_, nullptr, stack_);
      rc = match(re, subject, start);
    }
    // Other errors (match limits) cannot come from this family's linear patterns; the rest of the
    // piece is then left unsplit rather than dropped.
    if (rc < 0) return false;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md_);
    m_begin = ov[0];
    m_end = ov[1];
    return true;
  }

 private:
  int match(const Regex& re, std::string_view subject, size_t start) {
    // Subjects were made valid UTF-8 by encode(), so PCRE2's own check is skipped.
    return pcre2_match(re.get(), reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start,
                       PCRE2_NO_UTF_CHECK, md_, mctx_);
  }
  pcre2_match_data* md_;
  pcre2_match_context* mctx_ = nullptr;
  pcre2_jit_stack* stack_ = nullptr;
};

struct Segment {
  size_t begin, end;
  bool is_match;
};

// HF NormalizedString::split on one piece: the regex's matches and the gaps between them, then
// the delimiter behaviour. Empty pieces are dropped, as HF does.
void split_piece(std::string_view piece, const SplitStep& step, MatchScratch& scratch, std::vector<Segment>& segs,
                 std::vector<std::string_view>& out) {
  segs.clear();
  size_t prev = 0, pos = 0;
  while (pos <= piece.size()) {
    size_t mb, me;
    if (!scratch.find(step.regex, piece, pos, mb, me)) break;
    if (mb != prev) segs.push_back({prev, mb, false});
    segs.push_back({mb, me, true});
    prev = me;
    if (me == mb) {
      // Empty match: step over one character so the scan advances.
      if (me >= piece.size()) break;
      pos = me + next_utf8_unit(piece, me).len;
    } else {
      pos = me;
    }
  }
  if (prev != piece.size()) segs.push_back({prev, piece.size(), false});
  if (step.invert)
    for (auto& s : segs) s.is_match = !s.is_match;

  auto emit = [&](size_t b, size_t e) {
    if (e > b) out.push_back(piece.substr(b, e - b));
  };
  switch (step.behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& s : segs) emit(s.begin, s.end);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& s : segs)
        if (!s.is_match) emit(s.begin, s.end);
      break;
    case SplitBehavior::kMergedWithPrevious: {
      // A delimiter joins the piece before it.
      size_t start = 0;
      bool open = false;
      for (const auto& s : segs) {
        if (s.is_match) {
          emit(open ? start : s.begin, s.end);
          open = false;
        } else {
          if (open) emit(start, s.begin);
          start = s.begin;
          open = true;
        }
      }
      if (open) emit(start, piece.size());
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      // A delimiter joins the piece after it.
      size_t start = 0;
      bool pending = false;
      for (const auto& s : segs) {
        if (s.is_match) {
          if (pending) emit(start, s.begin);
          start = s.begin;
          pending = true;
        } else {
          emit(pending ? start : s.begin, s.end);
          pending = false;
        }
      }
      if (pending) emit(start, piece.size());
      break;
    }
    case SplitBehavior::kContiguous: {
      // Runs of adjacent delimiters become one piece.
      size_t i = 0;
      while (i < segs.size()) {
        size_t j = i;
        if (segs[i].is_match)
          while (j + 1 < segs.size() && segs[j + 1].is_match) ++j;
        emit(segs[i].begin, segs[j].end);
        i = j + 1;
      }
      break;
    }
  }
}

// Reused across the words of one encode() call, so the merge loop allocates nothing per word.
struct BpeScratch {
  struct Sym {
    int32_t id;
    int32_t prev, next;  // neighbours in the live list, -1 at the ends
    bool alive;          // false once merged into its left neighbour
  };
  struct Cand {
    int32_t rank, pos, new_id;
    // Min-heap order: lowest rank, then leftmost (HF's BPE::merge_word).
    bool operator<(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Sym> syms;
  std::vector<Cand> heap;
  std::vector<Segment> segs;
};

// Ranked BPE over one pre-token's bytes (HF's BPE::merge_word): repeatedly merge the adjacent pair
// with the lowest merge rank, leftmost first. Symbols are a linked list over the byte positions and
// candidates a binary heap, so a long word costs O(n log n). A popped candidate is stale when either
// side has merged since it was pushed: ranks are unique per pair, so it is current exactly when the
// pair now at its position still has its rank.
void bpe_merge(const TokenizerModel& m, std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) {
  using Sym = BpeScratch::Sym;
  using Cand = BpeScratch::Cand;
  const auto n = static_cast<int32_t>(word.size());
  std::vector<Sym>& syms = scratch.syms;
  std::vector<Cand>& heap = scratch.heap;
  syms.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i)
    syms[i] = {m.byte_to_id[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto push = [&](int32_t pos) {
    const Sym& l = syms[pos];
    const Sym& r = syms[l.next];
    if (const MergeInfo* mi = m.merges.find(l.id, r.id)) {
      heap.push_back({mi->rank, pos, mi->new_id});
      std::push_heap(heap.begin(), heap.end());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    const Cand c = heap.back();
    heap.pop_back();
    Sym& left = syms[c.pos];
    if (!left.alive || left.next < 0) continue;
    Sym& right = syms[left.next];
    if (const MergeInfo* mi = m.merges.find(left.id, right.id); mi == nullptr || mi->rank != c.rank) continue;
    left.id = c.new_id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) syms[left.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    if (left.next >= 0) push(c.pos);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = syms[i].next) out.push_back(syms[i].id);
}

void bpe_word(const TokenizerModel& m, std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) {
  if (word.size() == 1) {
    out.push_back(m.byte_to_id[static_cast<unsigned char>(word[0])]);
    return;
  }
  if (m.ignore_merges) {
    const auto it = m.bytes_to_id.find(word);
    if (it != m.bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  const uint64_t h = cacheable ? WordCache::hash(word) : 0;
  if (cacheable && m.cache.lookup(word, h, out)) return;
  const size_t start = out.size();
  bpe_merge(m, word, scratch, out);
  if (cacheable) m.cache.store(word, h, out.data() + start, out.size() - start);
}

// Pre-tokenizer + BPE for text that holds no added token.
void encode_plain(const TokenizerModel& m, std::string_view text, MatchScratch& scratch, BpeScratch& bpe,
                  std::vector<int32_t>& out) {
  if (text.empty()) return;
  std::vector<std::string_view> pieces{text}, next;
  for (const SplitStep& step : m.splits) {
    next.clear();
    for (const std::string_view p : pieces) split_piece(p, step, scratch, bpe.segs, next);
    pieces.swap(next);
  }
  // ByteLevel: the optional prefix space (per piece, as HF) and GPT-2 split, then bytes → BPE.
  std::vector<std::string> owned;
  if (m.byte_level_add_prefix_space) {
    owned.reserve(pieces.size());
    for (auto& p : pieces) {
      if (!p.empty() && p[0] != ' ') {
        owned.push_back(" " + std::string(p));
        p = owned.back();
      }
    }
  }
  if (m.byte_level_use_regex) {
    next.clear();
    for (const std::string_view p : pieces) {
      size_t pos = 0, mb, me, prev = 0;
      while (pos < p.size() && scratch.find(m.gpt2_regex, p, pos, mb, me)) {
        if (mb != prev) next.push_back(p.substr(prev, mb - prev));
        if (me > mb) next.push_back(p.substr(mb, me - mb));
        prev = me;
        pos = me > mb ? me : me + next_utf8_unit(p, me).len;
      }
      if (prev < p.size()) next.push_back(p.substr(prev));
    }
    pieces.swap(next);
  }
  for (const std::string_view p : pieces) bpe_word(m, p, bpe, out);
}

// Splits `text` on the tokens of `trie` (leftmost-longest) and hands the gaps to `on_text`. A match
// of `len` bytes at `i` counts only if accept(i, len).
template <typename Accept, typename OnText>
void split_added(const TokenTrie& trie, std::string_view text, std::vector<int32_t>& out, Accept&& accept,
                 OnText&& on_text) {
  size_t gap = 0, i = 0;
  while (i < text.size()) {
    if (!trie.may_start(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    const auto [len, id] = trie.longest_prefix(text.substr(i));
    if (id < 0 || !accept(i, len)) {
      ++i;
      continue;
    }
    on_text(text.substr(gap, i - gap));
    out.push_back(id);
    i += len;
    gap = i;
  }
  on_text(text.substr(gap));
}

}  // namespace
}  // namespace tok

Tokenizer::Tokenizer(std::unique_ptr<tok::TokenizerModel> m) : m_(std::move(m)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace tok {
namespace {

// `text` with invalid UTF-8 repaired (see encode()), and `spans` moved to the repaired offsets. A
// boundary inside a replaced subpart moves to that subpart's end.
std::string repair_with_spans(std::string_view text, std::vector<TextSpan>& spans) {
  std::string out;
  out.reserve(text.size() + 8);
  std::vector<size_t*> bounds;  // every span boundary, in text order
  for (TextSpan& s : spans) {
    bounds.push_back(&s.begin);
    bounds.push_back(&s.end);
  }
  size_t b = 0, i = 0;
  while (i < text.size()) {
    const Utf8Step st = next_utf8_unit(text, i);
    while (b < bounds.size() && *bounds[b] <= i) *bounds[b++] = out.size();
    if (st.kind == Utf8Unit::kValid)
      out.append(text.data() + i, st.len);
    else
      out.append(kReplacementChar);
    i += st.len;
    while (b < bounds.size() && *bounds[b] < i) *bounds[b++] = out.size();
  }
  for (; b < bounds.size(); ++b) *bounds[b] = out.size();
  return out;
}

}  // namespace
}  // namespace tok

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  if (allow_special) {
    const TextSpan all{0, text.size()};
    return encode_with_special_spans(text, std::span<const TextSpan>(&all, 1));
  }
  return encode_with_special_spans(text, {});
}

std::vector<int32_t> Tokenizer::encode_with_special_spans(std::string_view text,
                                                          std::span<const TextSpan> special_spans) const {
  std::string repaired;
  std::vector<TextSpan> spans(special_spans.begin(), special_spans.end());
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::repair_with_spans(text, spans);
    text = repaired;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  tok::MatchScratch scratch;
  tok::BpeScratch bpe;
  const tok::TokenizerModel& m = *m_;
  auto plain = [&](std::string_view t) { tok::encode_plain(m, t, scratch, bpe, out); };
  if (spans.empty()) {
    plain(text);
    return out;
  }
  // A match [at, at + len) of `part` (a piece of `text`) counts if one span holds all of it.
  auto accept_in = [&](std::string_view part) {
    const size_t base = static_cast<size_t>(part.data() - text.data());
    return [&spans, base](size_t at, size_t len) {
      const size_t b = base + at, e = b + len;
      auto it = std::upper_bound(spans.begin(), spans.end(), b,
                                 [](size_t x, const TextSpan& s) { return x < s.begin; });  // first span after b
      if (it == spans.begin()) return false;
      --it;
      return b >= it->begin && e <= it->end;
    };
  };
  tok::split_added(m.added_raw, text, out, accept_in(text), [&](std::string_view gap) {
    if (m.added_normalized.empty()) return plain(gap);
    tok::split_added(m.added_normalized, gap, out, accept_in(gap), plain);
  });
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (const int32_t id : ids) bytes.append(token_bytes(id));
  if (tok::is_valid_utf8(bytes)) return bytes;
  return tok::utf8_lossy(bytes);
}

int64_t Tokenizer::vocab_size() const {
  return static_cast<int64_t>(m_->id_to_text.size());
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const auto it = m_->text_to_id.find(token);
  if (it == m_->text_to_id.end()) return std::nullopt;
  return it->second;
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= m_->id_to_text.size()) return {};
  return m_->id_to_text[id];
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= m_->id_to_bytes.size()) return {};
  return m_->id_to_bytes[id];
}

bool Tokenizer::is_added_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < m_->id_flags.size() && (m_->id_flags[id] & tok::TokenizerModel::kAdded);
}
bool Tokenizer::is_special_token(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < m_->id_flags.size() && (m_->id_flags[id] & tok::TokenizerModel::kSpecial);
}

}  // namespace dsv4
