// runtime (test support): the deterministic fake model. See fake_model_runner.h.
#include "runtime/testing/fake_model_runner.h"

#include <algorithm>
#include <string>

namespace dsv4::testing {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
uint64_t hash2(uint64_t a, uint64_t b) { return mix(a ^ mix(b + 0x632be59bd9b4e019ull)); }
float unit_float(uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }  // [0,1)

constexpr uint64_t kEmptyPartial = 0x5eedull;
constexpr uint64_t kEmptyChain = 0xc4a1ull;

}  // namespace

FakeModelRunner::FakeModelRunner(FakeModelOptions options) : opt_(options) {
  DSV4_CHECK(opt_.vocab_size >= 2 && opt_.window >= 1 && opt_.ratio >= 1 && opt_.max_rollback >= 0,
             "bad FakeModelOptions");
  info_.model_name = "fake";
  info_.vocab_size = opt_.vocab_size;
  info_.context_size = opt_.context_size;
  info_.bos_token_id = 0;
  info_.eos_token_id = opt_.eos_token_id;
  info_.max_rollback = opt_.max_rollback;
  info_.has_mtp = true;
  // Sized like one layer of each state kind with the fake's window and ratio, so the pools' byte
  // accounting is exercised with distinct numbers per kind.
  info_.footprint.window_ring_per_seq = int64_t{opt_.window} * 584;
  info_.footprint.compressed_main_per_token = 584 / opt_.ratio;
  info_.footprint.compressed_indexer_per_token = 68 / opt_.ratio;
  info_.footprint.compressor_partial_per_seq = int64_t{opt_.ratio} * 2 * 4 * 64;
  seqs_.resize(static_cast<size_t>(opt_.max_seqs));
}

FakeModelRunner::Core FakeModelRunner::empty_core() const {
  Core c;
  c.ring.assign(static_cast<size_t>(opt_.window + opt_.max_rollback), 0);
  c.comp_ring.assign(static_cast<size_t>(opt_.ratio + opt_.max_rollback), 0);
  c.partial = kEmptyPartial;
  c.chain_last = kEmptyChain;
  return c;
}

Status FakeModelRunner::check_slot(SeqSlot seq, const char* what) const {
  if (seq < 0 || seq >= static_cast<SeqSlot>(seqs_.size()) || !seqs_[static_cast<size_t>(seq)].live) {
    return invalid_argument("fake_runner.bad_slot", std::string(what) + ": no live sequence " +
                                                        std::to_string(seq));
  }
  return Status::ok();
}

Result<SeqSlot> FakeModelRunner::create_sequence() {
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (!seqs_[i].live) {
      seqs_[i] = SeqState{};
      seqs_[i].live = true;
      seqs_[i].core = empty_core();
      ++live_;
      return static_cast<SeqSlot>(i);
    }
  }
  return resource_exhausted("fake_runner.no_slot", "all fake sequence slots are in use");
}

void FakeModelRunner::free_sequence(SeqSlot seq) {
  DSV4_CHECK(check_slot(seq, "free_sequence").is_ok(), "free_sequence of a dead slot");
  seqs_[static_cast<size_t>(seq)] = SeqState{};
  --live_;
}

int32_t FakeModelRunner::length(SeqSlot seq) const {
  DSV4_CHECK(check_slot(seq, "length").is_ok(), "length of a dead slot");
  return seqs_[static_cast<size_t>(seq)].core.len;
}

// What position c.len sees: its position, every compressed row (through the chain), the partial
// block, and the last `window` ring rows.
uint64_t FakeModelRunner::summary(const Core& c) const {
  uint64_t h = hash2(static_cast<uint64_t>(c.len), c.chain_last);
  h = hash2(h, c.partial);
  const int32_t ring_size = static_cast<int32_t>(c.ring.size());
  for (int32_t p = std::max(0, c.len - opt_.window); p < c.len; ++p) {
    h = hash2(h, c.ring[static_cast<size_t>(p % ring_size)]);
  }
  return h;
}

bool FakeModelRunner::step(Core& c, int32_t token) const {
  const int32_t p = c.len;
  const uint64_t row = hash2(summary(c), static_cast<uint64_t>(token) + 1);
  c.ring[static_cast<size_t>(p % static_cast<int32_t>(c.ring.size()))] = row;
  const uint64_t comp_in = mix(row ^ 0xabcdefull);
  c.comp_ring[static_cast<size_t>(p % static_cast<int32_t>(c.comp_ring.size()))] = comp_in;
  c.partial = hash2(c.partial, comp_in);
  c.len = p + 1;
  if (c.len % opt_.ratio == 0) {  // the block is complete: pool it into a compressed row
    c.chain_last = hash2(c.chain_last, c.partial);
    c.partial = kEmptyPartial;
    return true;
  }
  return false;
}

void FakeModelRunner::feed(SeqState& s, int32_t token) {
  if (step(s.core, token)) s.comp_chain.push_back(s.core.chain_last);
  s.tokens.push_back(token);
}

void FakeModelRunner::rebuild_partial(Core& c) const {
  c.partial = kEmptyPartial;
  const int32_t ring_size = static_cast<int32_t>(c.comp_ring.size());
  for (int32_t p = c.len - c.len % opt_.ratio; p < c.len; ++p) {
    c.partial = hash2(c.partial, c.comp_ring[static_cast<size_t>(p % ring_size)]);
  }
}

void FakeModelRunner::logits_row(uint64_t seed, float* row) const {
  const int32_t preferred = static_cast<int32_t>(mix(seed ^ 0x77ull) % static_cast<uint64_t>(opt_.vocab_size));
  for (int32_t v = 0; v < opt_.vocab_size; ++v) {
    row[v] = 3.0f * unit_float(hash2(seed, static_cast<uint64_t>(v))) - 1.5f + (v == preferred ? opt_.peak : 0.0f);
  }
}

Status FakeModelRunner::set_state_budget(int64_t bytes) {
  if (bytes < 0) return invalid_argument("fake_runner.bad_budget", "budget must be >= 0");
  budget_bytes_ = bytes;
  return Status::ok();
}

int64_t FakeModelRunner::state_bytes() const {
  int64_t n = 0;
  for (const SeqState& s : seqs_) {
    if (s.live) n += info_.footprint.per_seq() + info_.footprint.per_token() * s.core.len;
  }
  return n;
}

Status FakeModelRunner::forward(std::span<const RunnerToken> batch, std::vector<float>* logits) {
  logits->clear();
  ++forward_calls_;
  if (budget_bytes_ > 0 &&
      state_bytes() + info_.footprint.per_token() * static_cast<int64_t>(batch.size()) > budget_bytes_) {
    ++refused_forwards_;
    return resource_exhausted("fake_runner.budget", "the batch would grow the state past the budget");
  }
  const uint64_t leak = batch.empty() ? 0 : static_cast<uint64_t>(batch[0].token);
  for (const RunnerToken& t : batch) {
    DSV4_RETURN_IF_ERROR(check_slot(t.seq, "forward"));
    SeqState& s = seqs_[static_cast<size_t>(t.seq)];
    if (t.pos != s.core.len) {
      return invalid_argument("fake_runner.bad_pos", "forward: seq " + std::to_string(t.seq) + " at length " +
                                                         std::to_string(s.core.len) + " fed pos " +
                                                         std::to_string(t.pos));
    }
    if (t.token < 0 || t.token >= opt_.vocab_size) {
      return invalid_argument("fake_runner.bad_token", "forward: token out of vocab");
    }
    s.draft_valid = false;
    feed(s, t.token);
    ++forward_tokens_;
    if (t.want_logits) {
      uint64_t seed = summary(s.core);
      if (opt_.defect == FakeModelOptions::Defect::kBatchLeak) seed = hash2(seed, leak);
      logits->resize(logits->size() + static_cast<size_t>(opt_.vocab_size));
      logits_row(seed, logits->data() + logits->size() - static_cast<size_t>(opt_.vocab_size));
    }
  }
  return Status::ok();
}

Status FakeModelRunner::truncate(SeqSlot seq, int32_t new_len) {
  DSV4_RETURN_IF_ERROR(check_slot(seq, "truncate"));
  SeqState& s = seqs_[static_cast<size_t>(seq)];
  if (new_len < 0 || new_len > s.core.len || s.core.len - new_len > opt_.max_rollback) {
    return out_of_range("fake_runner.rollback_too_deep",
                        "truncate from " + std::to_string(s.core.len) + " to " + std::to_string(new_len));
  }
  s.draft_valid = false;
  const size_t n_rows = static_cast<size_t>(new_len / opt_.ratio);
  s.comp_chain.resize(n_rows);
  s.core.chain_last = n_rows == 0 ? kEmptyChain : s.comp_chain.back();
  s.core.len = new_len;
  s.tokens.resize(static_cast<size_t>(new_len));
  if (opt_.defect != FakeModelOptions::Defect::kStaleTruncate) rebuild_partial(s.core);
  // The ring needs nothing: rows of positions >= new_len are never read, and the rows of the last
  // `window` positions before new_len are still held because the ring has max_rollback spare slots.
  return Status::ok();
}

Status FakeModelRunner::copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) {
  DSV4_RETURN_IF_ERROR(check_slot(dst, "copy_prefix"));
  DSV4_RETURN_IF_ERROR(check_slot(src, "copy_prefix"));
  SeqState& d = seqs_[static_cast<size_t>(dst)];
  const SeqState& s = seqs_[static_cast<size_t>(src)];
  if (d.core.len != 0 || len < 0 || len > s.core.len) {
    return invalid_argument("fake_runner.bad_copy", "copy_prefix needs an empty dst and len <= length(src)");
  }
  if (budget_bytes_ > 0 && state_bytes() + info_.footprint.per_token() * len > budget_bytes_) {
    ++refused_copies_;
    return resource_exhausted("fake_runner.budget", "the copy would grow the state past the budget");
  }
  if (s.core.len - len <= opt_.max_rollback) {
    d = s;
    d.draft_valid = false;
    if (opt_.defect == FakeModelOptions::Defect::kForgetfulCopy) d.core.ring = empty_core().ring;
    return truncate(dst, len);
  }
  // Too far back for the spare rows: replay the kept tokens (exact, but costs compute).
  for (int32_t i = 0; i < len; ++i) feed(d, s.tokens[static_cast<size_t>(i)]);
  replayed_tokens_ += len;
  return Status::ok();
}

Status FakeModelRunner::draft(std::span<const RunnerToken> batch, std::vector<float>* logits) {
  logits->clear();
  for (const RunnerToken& t : batch) {
    DSV4_RETURN_IF_ERROR(check_slot(t.seq, "draft"));
    SeqState& s = seqs_[static_cast<size_t>(t.seq)];
    if (t.pos == s.core.len) {
      s.draft = s.core;
      s.draft_valid = true;
    } else if (!s.draft_valid || t.pos != s.draft.len) {
      return invalid_argument("fake_runner.bad_draft_pos", "draft: pos does not continue the draft");
    }
    if (t.token < 0 || t.token >= opt_.vocab_size) {
      return invalid_argument("fake_runner.bad_token", "draft: token out of vocab");
    }
    step(s.draft, t.token);
    // The draft head approximates the main model: the same row plus noise, and on a fraction of
    // positions a wrong preferred token.
    const uint64_t seed = summary(s.draft);
    logits->resize(logits->size() + static_cast<size_t>(opt_.vocab_size));
    float* row = logits->data() + logits->size() - static_cast<size_t>(opt_.vocab_size);
    logits_row(seed, row);
    const uint64_t noise = hash2(seed, 0xd1af7ull);
    for (int32_t v = 0; v < opt_.vocab_size; ++v) {
      row[v] += 0.6f * unit_float(hash2(noise, static_cast<uint64_t>(v))) - 0.3f;
    }
    if (static_cast<int32_t>(noise % 100) < opt_.draft_miss_percent) {
      row[static_cast<size_t>((noise >> 8) % static_cast<uint64_t>(opt_.vocab_size))] += 2.0f * opt_.peak + 3.0f;
    }
  }
  return Status::ok();
}

}  // namespace dsv4::testing
