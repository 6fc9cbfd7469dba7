// runtime: ModelRunner over model/model.h (see model_model_runner.h).
#include "runtime/model_model_runner.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "core/scratch.h"

namespace dsv4 {
StateFootprint model_state_footprint(const ModelConfig& c, int32_t kv_page_rows) {
  StateFootprint f;
  const int64_t row_bytes = KvRowLayout{c.head_dim, c.rope_head_dim}.bytes();
  const int64_t n_all = c.n_layers + c.n_mtp_layers;
  // Window rows FP8 in pages; a sliding table holds the pages of the last window_size rows: at most
  // ceil(window / page) + 1 of them when the window does not start on a page boundary.
  const int64_t window_pages = (c.window_size + kv_page_rows - 1) / kv_page_rows + 1;
  f.window_ring_per_seq = n_all * window_pages * kv_page_rows * row_bytes;
  for (int64_t il = 0; il < n_all && il < static_cast<int64_t>(c.compress_ratios.size()); ++il) {
    const int64_t r = c.compress_ratio(il);
    if (r <= 0) continue;
    const int64_t coff = r == 4 ? 2 : 1;
    const int64_t blocks = r == 4 ? 2 : 1;  // overlap keeps the previous block's rows too
    f.compressed_main_per_token += (row_bytes + r - 1) / r;
    f.kv_page_slack_per_seq += row_bytes * kv_page_rows;
    // Partial rows fp32 [kv | score], pages never straddle blocks: exactly the open block(s).
    f.compressor_partial_per_seq += blocks * r * 2 * coff * c.head_dim * 4;
    if (r == 4) {  // CSA: the indexer's keys and its own overlap compressor
      const int64_t key_bytes = index_key_bytes(c.index_head_dim);
      f.compressed_indexer_per_token += (key_bytes + 3) / 4;
      f.kv_page_slack_per_seq += key_bytes * kv_page_rows;
      f.compressor_partial_per_seq += 2 * 4 * 2 * 2 * c.index_head_dim * 4;
    }
  }
  return f;
}

int32_t default_checkpoint_interval(const ModelConfig& c) {
  int64_t step = std::max<int64_t>(1, c.window_size);
  for (int64_t il = 0; il < c.n_layers + c.n_mtp_layers && il < static_cast<int64_t>(c.compress_ratios.size()); ++il) {
    const int64_t r = c.compress_ratio(il);
    if (r > 0) step = std::lcm(step, r);
  }
  const int64_t n = (256 + step - 1) / step * step;
  return static_cast<int32_t>(std::min<int64_t>(n, int64_t{1} << 20));
}

int64_t checkpoint_state_bytes(const ModelConfig& c, int32_t kv_page_rows, int64_t interval, int64_t max_context) {
  if (interval <= 0) return 0;
  const int64_t pr = kv_page_rows, row_bytes = KvRowLayout{c.head_dim, c.rope_head_dim}.bytes();
  const int64_t key_bytes = index_key_bytes(c.index_head_dim);
  const int64_t n_all = c.n_layers + c.n_mtp_layers;
  // Pages of one layer's tables a checkpoint after p tokens may come to hold alone: the window's pages
  // (rows [p - window, p)) and a partly filled last page of the rows and keys (floor(p / ratio) entries).
  const auto layer_pages_bytes = [&](int64_t il, int64_t p) {
    if (p <= 0) return int64_t{0};
    const int64_t first = std::max<int64_t>(0, p - c.window_size);
    int64_t bytes = ((p - 1) / pr - first / pr + 1) * pr * row_bytes;
    const int64_t r = il < static_cast<int64_t>(c.compress_ratios.size()) ? c.compress_ratio(il) : 0;
    if (r > 0 && (p / r) % pr != 0) bytes += pr * row_bytes + (r == 4 ? pr * key_bytes : 0);
    return bytes;
  };
  // The pattern over checkpoint positions k·interval repeats once k·interval has gone through every
  // residue mod page_rows·ratio; positions past the context never hold a checkpoint.
  int64_t period = pr;
  for (int64_t il = 0; il < n_all && il < static_cast<int64_t>(c.compress_ratios.size()); ++il) {
    if (c.compress_ratio(il) > 0) period = std::lcm(period, pr * c.compress_ratio(il));
  }
  const int64_t n_positions = std::max<int64_t>(1, std::min(period / std::gcd(period, interval), max_context / interval));
  int64_t worst = 0;
  for (int64_t k = 1; k <= n_positions; ++k) {
    const int64_t at = k * interval;
    int64_t bytes = 0;
    // The MTP layers lag the main state by one position: either position, whichever holds more.
    for (int64_t il = 0; il < n_all; ++il) bytes += std::max(layer_pages_bytes(il, at), layer_pages_bytes(il, at - 1));
    worst = std::max(worst, bytes);
  }
  // Partial blocks: the open block(s), as in the per-sequence footprint; and the [hc_mult, dim] streams.
  return worst + model_state_footprint(c, kv_page_rows).compressor_partial_per_seq +
         static_cast<int64_t>(c.hc_mult * c.dim) * 4;
}

ModelModelRunner::ModelModelRunner(std::unique_ptr<Model> model, int32_t max_rollback) : model_(std::move(model)) {
  const ModelConfig& c = model_->config();
  has_mtp_ = c.n_mtp_layers > 0 && !c.has_dspark();
  info_.model_name = "deepseek_v4";
  info_.vocab_size = static_cast<int32_t>(c.vocab_size);
  info_.context_size = model_->max_context();
  info_.bos_token_id = static_cast<int32_t>(c.bos_token_id);
  info_.eos_token_id = static_cast<int32_t>(c.eos_token_id);
  info_.max_rollback = max_rollback;
  info_.has_mtp = has_mtp_;
  info_.placement = model_->placement_summary();
  info_.weights = model_->weights_summary();
  info_.footprint = model_state_footprint(c, model_->kv_pages().page_rows());
  checkpoint_interval_ = default_checkpoint_interval(c);
  info_.checkpoint_bytes = checkpoint_state_bytes(c, model_->kv_pages().page_rows(), checkpoint_interval_,
                                                  model_->max_context());
}

RunnerMemory ModelModelRunner::memory() const {
  const StateMemory m = model_->state_memory();
  RunnerMemory r;
  r.kv_page_bytes = model_->kv_pages().page_bytes();
  r.kv_pages_in_use = m.main_rows.pages_in_use;
  r.kv_pages_held = m.main_rows.pages_held;
  r.index_page_bytes = model_->index_pages().page_bytes();
  r.index_pages_in_use = m.index_keys.pages_in_use;
  r.index_pages_held = m.index_keys.pages_held;
  r.window_pages_in_use = m.window.pages_in_use;
  r.window_bytes_in_use = m.window.bytes_in_use;
  r.window_bytes_held = m.window.bytes_held;
  r.partial_pages_in_use = m.partial.pages_in_use;
  r.partial_bytes_in_use = m.partial.bytes_in_use;
  r.partial_bytes_held = m.partial.bytes_held;
  r.budget_bytes = m.budget_bytes;
  r.scratch_bytes_held = scratch_held_bytes();
  return r;
}

Result<std::unique_ptr<ModelModelRunner>> ModelModelRunner::load(const std::filesystem::path& dir,
                                                                 const ModelOptions& options) {
  DSV4_ASSIGN_OR_RETURN(auto model, Model::load(dir, options));
  return std::make_unique<ModelModelRunner>(std::move(model));
}

Status ModelModelRunner::check(SeqSlot seq, const char* what) const {
  if (seq < 0 || seq >= static_cast<SeqSlot>(seqs_.size()) || !seqs_[static_cast<size_t>(seq)].live) {
    return invalid_argument("runner.bad_slot", std::string(what) + ": no live sequence " + std::to_string(seq));
  }
  return Status::ok();
}

Result<SeqSlot> ModelModelRunner::create_sequence() {
  size_t i = 0;
  while (i < seqs_.size() && seqs_[i].live) ++i;
  if (i == seqs_.size()) seqs_.emplace_back();
  Seq& s = seqs_[i];
  s = Seq{};
  s.live = true;
  s.state = model_->new_sequence();
  return static_cast<SeqSlot>(i);
}

void ModelModelRunner::free_sequence(SeqSlot seq) {
  DSV4_CHECK(check(seq, "free_sequence").is_ok(), "free_sequence of a dead slot");
  seqs_[static_cast<size_t>(seq)] = Seq{};
}

int32_t ModelModelRunner::length(SeqSlot seq) const {
  DSV4_CHECK(check(seq, "length").is_ok(), "length of a dead slot");
  return static_cast<int32_t>(seqs_[static_cast<size_t>(seq)].state->n_tokens());
}

namespace {

// The sliding parts (window, partial rows) as page-sharing copies; the compressed rows and keys only
// as counts: they are append-only, so truncating them back restores them, and a snapshot that does
// not share their last page spares every forward a copy-on-write of it.
LayerState snapshot_layer(const LayerState& l) {
  LayerState s;
  s.window = l.window;
  s.compressor.partial = l.compressor.partial;
  s.compressor.n_entries = l.compressor.n_entries;
  s.index_keys.partial = l.index_keys.partial;
  s.index_keys.n_entries = l.index_keys.n_entries;
  return s;
}

void restore_compressor(CompressorState& saved, CompressorState* c) {
  c->partial = std::move(saved.partial);
  if (c->rows.size() > saved.n_entries) c->rows.truncate(saved.n_entries);  // pages past the cut go back
  c->n_entries = saved.n_entries;
}

void restore_layers(std::vector<LayerState>& saved, std::vector<LayerState>* layers) {
  for (size_t i = 0; i < layers->size(); ++i) {
    LayerState& l = (*layers)[i];
    l.window = std::move(saved[i].window);
    restore_compressor(saved[i].compressor, &l.compressor);
    restore_compressor(saved[i].index_keys, &l.index_keys);
  }
}

}  // namespace

ModelModelRunner::Snapshot ModelModelRunner::take(const SequenceState& st, bool main_too) const {
  Snapshot s;
  if (main_too)
    for (const LayerState& l : st.layers) s.layers.push_back(snapshot_layer(l));
  for (const LayerState& l : st.mtp_layers) s.mtp_layers.push_back(snapshot_layer(l));
  s.n_tokens = st.n_tokens_;
  s.n_mtp_tokens = st.n_mtp_tokens_;
  return s;
}

void ModelModelRunner::restore(Snapshot& s, SequenceState* st, bool main_too) const {
  if (main_too) {
    restore_layers(s.layers, &st->layers);
    st->n_tokens_ = s.n_tokens;
  }
  restore_layers(s.mtp_layers, &st->mtp_layers);
  st->n_mtp_tokens_ = s.n_mtp_tokens;
  s = Snapshot{};
}

void ModelModelRunner::end_draft(Seq& s) {
  if (!s.drafting) return;
  restore(s.draft_snap, s.state.get(), /*main_too=*/false);
  s.drafting = false;
}

Status ModelModelRunner::run(std::span<const RunnerToken> batch, std::vector<float>* logits, bool snapshot) {
  std::map<SeqSlot, int64_t> first_pos;  // each sequence's first position in this call
  for (const RunnerToken& t : batch) {
    DSV4_RETURN_IF_ERROR(check(t.seq, "forward"));
    first_pos.emplace(t.seq, t.pos);
  }
  std::map<SeqSlot, Undo> undo;
  for (auto& [slot, pos] : first_pos) {
    Seq& s = seqs_[static_cast<size_t>(slot)];
    end_draft(s);
    undo[slot] = {take(*s.state, /*main_too=*/true), s.last_h, s.tokens.size(), s.checkpoints.size()};
  }
  // A row at a checkpoint position (past a sequence's first row here) goes into a later forward, so the
  // state at the checkpoint exists between the two. Rows keep their order within each piece, so each
  // sequence's rows stay contiguous and in position order. Decodes never split.
  const int64_t every = checkpoints_on_ ? checkpoint_interval_ : 0;
  std::vector<int32_t> piece(batch.size(), 0);
  int32_t n_pieces = 1;
  if (every > 0) {
    for (size_t r = 0; r < batch.size(); ++r) {
      piece[r] = static_cast<int32_t>(batch[r].pos / every - first_pos[batch[r].seq] / every);
      n_pieces = std::max(n_pieces, piece[r] + 1);
    }
  }
  Status st = Status::ok();
  if (n_pieces == 1) {
    st = run_segment(batch, logits);
  } else {
    // Logit rows come back per piece; put them back in batch order.
    std::vector<std::vector<float>> piece_logits(static_cast<size_t>(n_pieces));
    std::vector<RunnerToken> rows;
    for (int32_t g = 0; g < n_pieces && st.is_ok(); ++g) {
      rows.clear();
      for (size_t r = 0; r < batch.size(); ++r) {
        if (piece[r] == g) rows.push_back(batch[r]);
      }
      if (!rows.empty()) st = run_segment(rows, &piece_logits[static_cast<size_t>(g)]);
      if (!st.is_ok()) break;
      for (const RunnerToken& t : rows) {
        Seq& s = seqs_[static_cast<size_t>(t.seq)];
        const int64_t n = s.state->n_tokens();
        if (n % every != 0 || (!s.checkpoints.empty() && s.checkpoints.back()->n_tokens >= n)) continue;
        s.checkpoints.push_back(std::make_shared<const Checkpoint>(Checkpoint{n, *s.state, s.last_h}));
      }
    }
    if (st.is_ok()) {
      const auto vocab = static_cast<size_t>(info_.vocab_size);
      std::vector<size_t> next(static_cast<size_t>(n_pieces), 0);
      logits->clear();
      for (size_t r = 0; r < batch.size(); ++r) {
        if (!batch[r].want_logits) continue;
        const auto g = static_cast<size_t>(piece[r]);
        const float* row = piece_logits[g].data() + next[g]++ * vocab;
        logits->insert(logits->end(), row, row + vocab);
      }
    }
  }
  // The last piece may also end exactly on a checkpoint position (a decode reaching it).
  if (st.is_ok() && every > 0) {
    for (auto& [slot, pos] : first_pos) {
      Seq& s = seqs_[static_cast<size_t>(slot)];
      const int64_t n = s.state->n_tokens();
      if (n % every != 0 || (!s.checkpoints.empty() && s.checkpoints.back()->n_tokens >= n)) continue;
      s.checkpoints.push_back(std::make_shared<const Checkpoint>(Checkpoint{n, *s.state, s.last_h}));
    }
  }
  for (auto& [slot, u] : undo) {
    Seq& s = seqs_[static_cast<size_t>(slot)];
    if (!st.is_ok()) {
      restore(u.snap, s.state.get(), /*main_too=*/true);
      s.last_h = std::move(u.last_h);
      s.tokens.resize(u.n_tokens);
      s.checkpoints.resize(u.n_checkpoints);
    } else if (snapshot) {
      s.snap = std::move(u.snap);
      s.snap_last_h = std::move(u.last_h);
      s.has_snap = true;
    }
  }
  return st;
}

Status ModelModelRunner::run_segment(std::span<const RunnerToken> batch, std::vector<float>* logits) {
  // Compact the slots of this call into the model's seq indices.
  std::map<SeqSlot, int32_t> index;
  std::vector<SequenceState*> states;
  std::vector<BatchToken> bt;
  bt.reserve(batch.size());
  for (const RunnerToken& t : batch) {
    auto [it, added] = index.emplace(t.seq, static_cast<int32_t>(states.size()));
    if (added) states.push_back(seqs_[static_cast<size_t>(t.seq)].state.get());
    bt.push_back({it->second, t.pos, t.token, t.want_logits});
  }
  ForwardCapture capture;
  DSV4_RETURN_IF_ERROR(model_->forward(bt, states, logits, has_mtp_ ? &capture : nullptr));
  const ModelConfig& c = model_->config();
  const auto hd = static_cast<size_t>(c.hc_mult * c.dim);
  // MTP catch-up: position i consumes (final streams at i, token at i+1) for every i whose next token
  // is now known, so the MTP state always covers positions 0 .. n_tokens-2.
  std::vector<BatchToken> mtp;
  std::vector<float> mtp_h;
  std::map<SeqSlot, int64_t> mtp_next;  // next MTP position per sequence, as the rows below advance it
  for (auto& [slot, i] : index) mtp_next[slot] = seqs_[static_cast<size_t>(slot)].state->n_mtp_tokens();
  for (size_t r = 0; r < batch.size(); ++r) {
    Seq& s = seqs_[static_cast<size_t>(batch[r].seq)];
    s.tokens.push_back(batch[r].token);
    if (!has_mtp_) continue;
    if (batch[r].pos >= 1 && mtp_next[batch[r].seq] == batch[r].pos - 1) {
      ++mtp_next[batch[r].seq];
      // The previous position's streams: from this batch or, for the first row, kept from before.
      const bool prev_in_batch = r > 0 && batch[r - 1].seq == batch[r].seq;
      const float* h = prev_in_batch ? capture.final_streams.data() + (r - 1) * hd : s.last_h.data();
      if (!prev_in_batch && s.last_h.size() != hd) return internal_error("runner.mtp_lost", "no streams for MTP catch-up");
      mtp.push_back({bt[r].seq, batch[r].pos - 1, batch[r].token, false});
      mtp_h.insert(mtp_h.end(), h, h + hd);
    }
    s.last_h.assign(capture.final_streams.data() + r * hd, capture.final_streams.data() + (r + 1) * hd);
  }
  // The runtime feeds each sequence's rows contiguously and in position order, so `mtp` continues every
  // sequence's MTP state in order, as forward_mtp requires.
  if (!mtp.empty()) DSV4_RETURN_IF_ERROR(model_->forward_mtp(mtp, mtp_h, states, nullptr));
  return Status::ok();
}

Status ModelModelRunner::forward(std::span<const RunnerToken> batch, std::vector<float>* logits) {
  return run(batch, logits, /*snapshot=*/true);
}

Status ModelModelRunner::replay(SeqSlot seq, const std::vector<int32_t>& tokens, int64_t from, int64_t to) {
  if (to <= from) return Status::ok();
  std::vector<RunnerToken> in;
  in.reserve(static_cast<size_t>(to - from));
  for (int64_t p = from; p < to; ++p) in.push_back({seq, static_cast<int32_t>(p), tokens[static_cast<size_t>(p)], false});
  replayed_tokens_ += to - from;
  std::vector<float> unused;
  return run(in, &unused, /*snapshot=*/false);
}

Status ModelModelRunner::truncate(SeqSlot seq, int32_t new_len) {
  DSV4_RETURN_IF_ERROR(check(seq, "truncate"));
  Seq& s = seqs_[static_cast<size_t>(seq)];
  end_draft(s);
  const int64_t len = s.state->n_tokens();
  if (new_len == len) return Status::ok();
  if (new_len > len || len - new_len > info_.max_rollback || !s.has_snap || new_len < s.snap.n_tokens) {
    return out_of_range("runner.rollback_too_deep", "truncate from " + std::to_string(len) + " to " +
                                                        std::to_string(new_len) + " reaches before the last forward");
  }
  const int64_t base = s.snap.n_tokens;
  const std::vector<int32_t> kept(s.tokens.begin(), s.tokens.begin() + new_len);
  restore(s.snap, s.state.get(), /*main_too=*/true);
  s.last_h = s.snap_last_h;
  s.tokens.resize(static_cast<size_t>(base));
  s.has_snap = false;
  // Checkpoints past the cut saw tokens that are gone; those up to it stay exact.
  while (!s.checkpoints.empty() && s.checkpoints.back()->n_tokens > new_len) s.checkpoints.pop_back();
  return replay(seq, kept, base, new_len);
}

Status ModelModelRunner::copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) {
  DSV4_RETURN_IF_ERROR(check(dst, "copy_prefix"));
  DSV4_RETURN_IF_ERROR(check(src, "copy_prefix"));
  Seq& d = seqs_[static_cast<size_t>(dst)];
  Seq& s = seqs_[static_cast<size_t>(src)];
  if (dst == src || d.state->n_tokens() != 0 || len < 0 || len > s.state->n_tokens()) {
    return invalid_argument("runner.bad_copy", "copy_prefix needs an empty dst and len <= length(src)");
  }
  end_draft(s);
  const int64_t replayed_before = replayed_tokens_;
  const Status st = copy_state(d, s, dst, len);
  prefix_replayed_tokens_ += replayed_tokens_ - replayed_before;
  if (!st.is_ok()) {  // dst back to empty, whatever the failure left
    d = Seq{};
    d.live = true;
    d.state = model_->new_sequence();
  }
  return st;
}

Status ModelModelRunner::copy_state(Seq& d, Seq& s, SeqSlot dst, int32_t len) {
  if (len == s.state->n_tokens() || (s.has_snap && len >= s.snap.n_tokens && s.state->n_tokens() - len <= info_.max_rollback)) {
    *d.state = *s.state;
    d.tokens = s.tokens;
    d.last_h = s.last_h;
    d.has_snap = s.has_snap;
    d.snap = s.snap;
    d.snap_last_h = s.snap_last_h;
    d.checkpoints = s.checkpoints;
    return truncate(dst, len);
  }
  // Too far back for the snapshot: start from the nearest checkpoint at or before len (shared, not
  // copied, for later hits on dst) and replay the rest from the kept tokens.
  int64_t base = 0;
  for (const auto& c : s.checkpoints) {
    if (c->n_tokens > len) break;
    d.checkpoints.push_back(c);
  }
  if (!d.checkpoints.empty()) {
    const Checkpoint& c = *d.checkpoints.back();
    *d.state = c.state;
    d.last_h = c.last_h;
    d.tokens.assign(s.tokens.begin(), s.tokens.begin() + c.n_tokens);
    base = c.n_tokens;
  }
  return replay(dst, s.tokens, base, len);
}

void ModelModelRunner::keep_checkpoints(bool on) {
  checkpoints_on_ = on;
  info_.checkpoint_interval = on ? checkpoint_interval_ : 0;
  if (!on) {
    for (Seq& s : seqs_) s.checkpoints.clear();
  }
}

void ModelModelRunner::set_checkpoint_interval(int32_t n_tokens) {
  DSV4_CHECK(n_tokens >= 1, "checkpoint interval must be >= 1");
  checkpoint_interval_ = n_tokens;
  info_.checkpoint_bytes = checkpoint_state_bytes(model_->config(), model_->kv_pages().page_rows(), n_tokens,
                                                  model_->max_context());
  keep_checkpoints(checkpoints_on_);
}

int64_t ModelModelRunner::checkpoints_held() const {
  std::set<const Checkpoint*> seen;
  for (const Seq& s : seqs_) {
    for (const auto& c : s.checkpoints) seen.insert(c.get());
  }
  return static_cast<int64_t>(seen.size());
}

Status ModelModelRunner::set_state_budget(int64_t bytes) {
  if (bytes < 0) return invalid_argument("runner.bad_budget", "the state budget must be >= 0 bytes (0 = unlimited)");
  model_->set_state_budget(bytes);
  return Status::ok();
}

Status ModelModelRunner::draft(std::span<const RunnerToken> batch, std::vector<float>* logits) {
  if (!has_mtp_) return unimplemented("runner.no_mtp", "this model has no MTP module");
  const ModelConfig& c = model_->config();
  const auto hd = static_cast<size_t>(c.hc_mult * c.dim);
  std::map<SeqSlot, int32_t> index;
  std::vector<SequenceState*> states;
  std::vector<BatchToken> bt;
  std::vector<float> h;
  for (const RunnerToken& t : batch) {
    DSV4_RETURN_IF_ERROR(check(t.seq, "draft"));
    Seq& s = seqs_[static_cast<size_t>(t.seq)];
    const int64_t n = s.state->n_tokens();
    if (n == 0 || s.last_h.size() != hd) return invalid_argument("runner.draft_empty", "draft needs a computed position");
    if (t.pos == n) {
      end_draft(s);
      s.draft_snap = take(*s.state, /*main_too=*/false);
      s.drafting = true;
    } else if (!s.drafting || t.pos - 1 != s.state->n_mtp_tokens()) {
      return invalid_argument("runner.bad_draft_pos", "draft: pos does not continue the draft");
    }
    auto [it, added] = index.emplace(t.seq, static_cast<int32_t>(states.size()));
    if (added) states.push_back(s.state.get());
    // MTP position pos-1 takes the main streams there on the first step; past it the main streams do
    // not exist yet and the MTP block's own output streams of the previous step feed back (recurrent
    // drafting, spec §2.11).
    bt.push_back({it->second, t.pos - 1, t.token, true});
    const std::vector<float>& src = t.pos == n ? s.last_h : s.draft_h;
    h.insert(h.end(), src.begin(), src.end());
  }
  ForwardCapture capture;
  DSV4_RETURN_IF_ERROR(model_->forward_mtp(bt, h, states, logits, &capture));
  for (size_t r = 0; r < batch.size(); ++r) {
    seqs_[static_cast<size_t>(batch[r].seq)].draft_h.assign(capture.final_streams.begin() + static_cast<ptrdiff_t>(r * hd),
                                                            capture.final_streams.begin() + static_cast<ptrdiff_t>((r + 1) * hd));
  }
  return Status::ok();
}

}  // namespace dsv4
