// runtime: scheduler, step loop, speculative verification and prefix cache (see engine_core.h).
#include "runtime/engine_core.h"

#include <algorithm>
#include <string>

namespace dsv4 {

struct EngineCore::Sequence {
  RequestId id = 0;
  GenerationRequest req;
  UpdateCallback on_update;
  std::vector<int32_t> tokens;  // prompt + generated; the last one is fed next
  int32_t n_prompt = 0;
  int32_t n_generated = 0;  // completion tokens so far (an ending EOS / stop id included)
  int32_t n_computed = 0;   // tokens whose state the runner holds
  SeqSlot slot = -1;
  std::vector<int32_t> blocks;
  bool running = false;
  bool finished = false;
  int64_t admit_order = 0;
  uint64_t seed = 0;
  TokenHistory history;
  std::unique_ptr<DetokenizerStream> detok;
  StopMatcher stop{{}};
  // This step's work.
  int32_t step_tokens = 0;
  int32_t step_drafts = 0;
  std::vector<int32_t> drafts;          // [step_drafts]
  std::vector<std::vector<float>> q;    // [step_drafts][vocab] draft distributions
};

// A finished sequence kept for prefix reuse: its runner state, its blocks and its token history.
struct EngineCore::Donor {
  SeqSlot slot = -1;
  std::vector<int32_t> tokens;  // exactly the tokens its runner state holds
  std::vector<int32_t> blocks;
  std::vector<uint64_t> keys;   // block-chain hashes registered in donor_index_
};

EngineCore::EngineCore(ModelRunner* runner, const Detokenizer* detokenizer, EngineCoreOptions options)
    : runner_(runner), detok_(detokenizer), opt_(options), info_(runner->info()), pool_(0) {
  DSV4_CHECK(opt_.max_batch_tokens >= 1 && opt_.max_running >= 1, "EngineCoreOptions: empty batch");
  if (opt_.speculative_k > 0) {
    DSV4_CHECK(info_.has_mtp, "speculative decoding needs a runner with an MTP draft head");
    opt_.speculative_k = std::min(opt_.speculative_k, info_.max_rollback);
  }
  DSV4_CHECK(opt_.max_batch_tokens >= 1 + opt_.speculative_k, "EngineCoreOptions: batch smaller than a verify step");
  // Checkpoints only pay off with a prefix cache; the runner reports their interval and cost once on.
  runner_->keep_checkpoints(opt_.prefix_cache_entries > 0);
  info_ = runner_->info();
  const int64_t runner_budget = opt_.runner_budget_bytes >= 0 ? opt_.runner_budget_bytes
                                : opt_.pool_blocks > 0       ? 0
                                                             : opt_.pool_bytes;
  const Status budget = runner_->set_state_budget(runner_budget);
  DSV4_CHECK(budget.is_ok(), "EngineCore: " + budget.to_string());
  auto plan = plan_pool(info_.footprint, opt_.pool_bytes, opt_.block_tokens, info_.checkpoint_interval,
                        info_.checkpoint_bytes);
  DSV4_CHECK(plan.is_ok(), "EngineCore: " + plan.status().to_string());
  plan_ = plan.value();
  if (opt_.pool_blocks > 0) plan_.n_blocks = opt_.pool_blocks;
  pool_ = BlockPool(plan_.n_blocks);
}

EngineCore::~EngineCore() {
  cancel_all();
  clear_prefix_cache();
}

Status EngineCore::validate(const GenerationRequest& r) const {
  if (r.prompt_ids.empty()) return invalid_argument("request.empty_prompt", "the prompt has no tokens");
  for (int32_t id : r.prompt_ids) {
    if (id < 0 || id >= info_.vocab_size) {
      return invalid_argument("request.token_out_of_vocab",
                              "prompt token " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  const SamplingParams& p = r.sampling;
  if (r.stop.max_tokens < 1) return invalid_argument("request.bad_max_tokens", "max_tokens must be >= 1");
  if (!(p.temperature >= 0.0f) || !(p.top_p > 0.0f && p.top_p <= 1.0f) || p.top_k < 0 ||
      !(p.min_p >= 0.0f && p.min_p <= 1.0f) || !(p.repetition_penalty > 0.0f) || p.top_logprobs < -1 ||
      p.top_logprobs > 20) {
    return invalid_argument("request.bad_sampling", "a sampling parameter is outside its range");
  }
  if (!r.stop.stop_strings.empty() && detok_ == nullptr) {
    return unimplemented("request.stop_strings_need_tokenizer", "stop strings need a detokenizer; this engine has none");
  }
  const int64_t total = static_cast<int64_t>(r.prompt_ids.size()) + r.stop.max_tokens;
  if (total > info_.context_size) {
    return out_of_range("request.context_exceeded", "prompt (" + std::to_string(r.prompt_ids.size()) +
                                                        ") + max_tokens (" + std::to_string(r.stop.max_tokens) +
                                                        ") exceeds the context of " +
                                                        std::to_string(info_.context_size));
  }
  if (plan_.blocks_for(total + opt_.speculative_k) > plan_.n_blocks) {
    return out_of_range("request.exceeds_pool", "prompt + max_tokens needs more state than the whole pool");
  }
  return Status::ok();
}

Status EngineCore::add(RequestId id, GenerationRequest request, UpdateCallback on_update) {
  DSV4_RETURN_IF_ERROR(validate(request));
  if (seqs_.count(id) != 0) return invalid_argument("request.duplicate_id", "request id already in use");
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = request.prompt_ids;
  s->n_prompt = static_cast<int32_t>(s->tokens.size());
  s->history.add_prompt(s->tokens);
  s->seed = request.sampling.seed.value_or(opt_.default_seed ^ (id * 0x9e3779b97f4a7c15ull));
  if (detok_ != nullptr) s->detok = detok_->new_stream();
  s->stop = StopMatcher(request.stop.stop_strings);
  s->req = std::move(request);
  s->on_update = std::move(on_update);
  waiting_.push_back(s.get());
  stats_.prompt_tokens += s->n_prompt;
  seqs_[id] = std::move(s);
  return Status::ok();
}

void EngineCore::cancel(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Sequence& s = *it->second;
  GenerationUpdate update;
  finish(s, FinishReason::kCancelled, &update);
  if (s.on_update) s.on_update(update);
  seqs_.erase(it);
}

void EngineCore::cancel_all() {
  std::vector<RequestId> ids;
  for (const auto& [id, s] : seqs_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (RequestId id : ids) cancel(id);
}

StateFootprint EngineCore::bytes_in_use() const {
  int64_t n_seqs = 0, n_tokens = 0;
  for (const Sequence* s : running_) {
    ++n_seqs;
    n_tokens += s->n_computed;
  }
  for (const auto& d : donors_) {
    ++n_seqs;
    n_tokens += static_cast<int64_t>(d->tokens.size());
  }
  const StateFootprint& f = info_.footprint;
  return {f.window_ring_per_seq * n_seqs, f.compressed_main_per_token * n_tokens,
          f.compressed_indexer_per_token * n_tokens, f.compressor_partial_per_seq * n_seqs,
          f.kv_page_slack_per_seq * n_seqs};
}

int64_t EngineCore::checkpoint_bytes_in_use() const {
  int64_t n = 0;
  for (const Sequence* s : running_) n += plan_.checkpoints_for(s->n_computed);
  for (const auto& d : donors_) n += plan_.checkpoints_for(static_cast<int64_t>(d->tokens.size()));
  return n * plan_.checkpoint_bytes;
}

// ---- pool ----

bool EngineCore::ensure_blocks(Sequence& s, int32_t n_tokens_total) {
  const int32_t need = plan_.blocks_for(n_tokens_total) - static_cast<int32_t>(s.blocks.size());
  if (need <= 0) return true;
  while (pool_.free_count() < need && !donors_.empty()) evict_donor();
  return pool_.allocate(need, &s.blocks).is_ok();
}

bool EngineCore::make_room(int32_t blocks_needed, const Sequence* keep) {
  while (pool_.free_count() < blocks_needed && !donors_.empty()) evict_donor();
  while (pool_.free_count() < blocks_needed) {
    if (running_.empty() || running_.back() == keep) return false;
    preempt(*running_.back());
  }
  return true;
}

// Preemption by recompute: the state goes back to the pools; the sequence keeps its tokens (prompt and
// everything generated so far), its RNG position and its text state, and is prefilled again later.
void EngineCore::preempt(Sequence& s) {
  release_state(s, /*donate=*/false);
  std::erase(running_, &s);
  s.running = false;
  s.n_computed = 0;
  waiting_.push_front(&s);
  ++stats_.preemptions;
}

void EngineCore::release_state(Sequence& s, bool donate) {
  if (s.slot < 0) {
    pool_.release_all(&s.blocks);
    return;
  }
  // A verify step may end a sequence with rejected drafts (or an accepted EOS draft, which is not kept
  // in `tokens`) still fed: roll them back before donating.
  s.n_computed = std::min(s.n_computed, static_cast<int32_t>(s.tokens.size()));
  if (donate && runner_->length(s.slot) > s.n_computed &&
      !runner_->truncate(s.slot, s.n_computed).is_ok()) {
    donate = false;
  }
  if (donate && opt_.prefix_cache_entries > 0 && s.n_computed >= opt_.block_tokens) {
    auto d = std::make_unique<Donor>();
    d->slot = s.slot;
    d->tokens.assign(s.tokens.begin(), s.tokens.begin() + s.n_computed);
    d->blocks = std::move(s.blocks);
    s.blocks.clear();
    uint64_t h = 0;
    for (size_t b = 0; (b + 1) * static_cast<size_t>(opt_.block_tokens) <= d->tokens.size(); ++b) {
      h = block_hash(h, d->tokens.data() + b * static_cast<size_t>(opt_.block_tokens));
      d->keys.push_back(h);
      donor_index_.emplace(h, d.get());
    }
    donors_.push_front(std::move(d));
    while (static_cast<int32_t>(donors_.size()) > opt_.prefix_cache_entries) evict_donor();
  } else {
    runner_->free_sequence(s.slot);
    pool_.release_all(&s.blocks);
  }
  s.slot = -1;
}

// ---- prefix cache ----

uint64_t EngineCore::block_hash(uint64_t prev, const int32_t* tokens) const {
  uint64_t h = prev ^ 0xcbf29ce484222325ull;
  for (int32_t i = 0; i < opt_.block_tokens; ++i) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(tokens[i]));
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

void EngineCore::evict_donor() {
  std::unique_ptr<Donor> d = std::move(donors_.back());
  donors_.pop_back();
  for (uint64_t k : d->keys) {
    auto [lo, hi] = donor_index_.equal_range(k);
    for (auto it = lo; it != hi; ++it) {
      if (it->second == d.get()) {
        donor_index_.erase(it);
        break;
      }
    }
  }
  runner_->free_sequence(d->slot);
  pool_.release_all(&d->blocks);
}

void EngineCore::clear_prefix_cache() {
  while (!donors_.empty()) evict_donor();
}

// Finds the cached sequence sharing the longest token prefix (content-addressed by block-chain hash,
// then extended token by token, so a hit may end anywhere inside a window or compression block) and
// copies its state. At least the last known token is always recomputed: its logits are needed.
void EngineCore::lookup_prefix(Sequence& s) {
  if (donors_.empty()) return;
  const size_t limit = s.tokens.size() - 1;
  const auto bt = static_cast<size_t>(opt_.block_tokens);
  std::vector<Donor*> candidates;
  uint64_t h = 0;
  for (size_t b = 0; (b + 1) * bt <= limit; ++b) {
    h = block_hash(h, s.tokens.data() + b * bt);
    auto [lo, hi] = donor_index_.equal_range(h);
    if (lo == hi) break;
    candidates.clear();
    for (auto it = lo; it != hi; ++it) candidates.push_back(it->second);
  }
  Donor* best = nullptr;
  size_t best_len = 0;
  for (Donor* d : candidates) {
    size_t n = 0;  // compare every token: a hash collision is a miss, never a wrong state
    const size_t m = std::min(limit, d->tokens.size());
    while (n < m && d->tokens[n] == s.tokens[n]) ++n;
    if (n > best_len) {
      best_len = n;
      best = d;
    }
  }
  if (best == nullptr || best_len == 0) return;
  for (auto it = donors_.begin(); it != donors_.end(); ++it) {  // LRU touch (first: it must outlive the evictions below)
    if (it->get() == best) {
      donors_.splice(donors_.begin(), donors_, it);
      break;
    }
  }
  // A copy that replays tokens needs pages of its own; under a tight budget the other cached sequences
  // are what holds them, and the hit is worth more than the least recently used of those.
  Status copied = runner_->copy_prefix(s.slot, best->slot, static_cast<int32_t>(best_len));
  while (copied.code() == StatusCode::kResourceExhausted && donors_.size() > 1) {
    evict_donor();
    copied = runner_->copy_prefix(s.slot, best->slot, static_cast<int32_t>(best_len));
  }
  if (!copied.is_ok()) return;
  s.n_computed = static_cast<int32_t>(best_len);  // counted as a hit once the sequence is admitted
}

// ---- scheduling ----

bool EngineCore::admit(Sequence& s) {
  auto slot = runner_->create_sequence();
  if (!slot.is_ok()) {
    if (donors_.empty()) return false;
    evict_donor();  // cached sequences hold runner slots too
    slot = runner_->create_sequence();
    if (!slot.is_ok()) return false;
  }
  s.slot = slot.value();
  s.n_computed = 0;
  lookup_prefix(s);
  return true;
}

void EngineCore::schedule(std::vector<Sequence*>* batch) {
  int32_t budget = opt_.max_batch_tokens;
  const std::vector<Sequence*> snapshot = running_;
  for (Sequence* s : snapshot) {
    if (budget == 0) break;
    if (!s->running) continue;  // preempted earlier in this loop
    int32_t n = 0, k = 0;
    if (!plan_work(*s, budget, &n, &k)) continue;
    if (!ensure_blocks(*s, s->n_computed + n)) {
      if (k == 0 && n > 1) {  // a prefill chunk shrinks to what the free blocks hold before anyone is preempted
        const int32_t fit = (static_cast<int32_t>(s->blocks.size()) + pool_.free_count() - plan_.seq_blocks) *
                                plan_.block_tokens - s->n_computed;
        if (fit >= 1) n = std::min(n, fit);
      }
      if (!ensure_blocks(*s, s->n_computed + n)) {
        const int32_t need = plan_.blocks_for(s->n_computed + n) - static_cast<int32_t>(s->blocks.size());
        if (!make_room(need, s) || !ensure_blocks(*s, s->n_computed + n)) {
          preempt(*s);
          continue;
        }
      }
    }
    s->step_tokens = n;
    s->step_drafts = k;
    batch->push_back(s);
    budget -= n;
  }
  while (budget > 0 && !waiting_.empty() && static_cast<int32_t>(running_.size()) < opt_.max_running) {
    Sequence* s = waiting_.front();
    if (!admit(*s)) break;
    int32_t n = 0, k = 0;
    bool fits = plan_work(*s, budget, &n, &k) && ensure_blocks(*s, s->n_computed + n);
    if (!fits && k == 0) {
      // Admit only with room for some progress; never preempt running sequences for a newcomer.
      const int32_t fit_tokens = (pool_.free_count() - plan_.seq_blocks) * plan_.block_tokens - s->n_computed;
      if (fit_tokens >= 1 && n >= 1) {
        n = std::min(n, fit_tokens);
        fits = ensure_blocks(*s, s->n_computed + n);
      }
    }
    if (!fits) {
      release_state(*s, false);
      s->n_computed = 0;
      break;
    }
    waiting_.pop_front();
    if (s->n_computed > 0) {
      ++stats_.prefix_hits;
      stats_.prefix_hit_tokens += s->n_computed;
    }
    s->running = true;
    s->admit_order = admit_counter_++;
    running_.push_back(s);
    s->step_tokens = n;
    s->step_drafts = k;
    batch->push_back(s);
    budget -= n;
  }
}

// What a sequence does this step. A decode feeds its pending token plus k drafts, where k depends only
// on the request (never on the batch or the pool), so a seeded sampled request consumes the same random
// draws alone or in any batch. With speculation on, a prefill stops one token short: the last known
// token is fed by a decode step with drafts, exactly as it would be after a preemption or a prefix hit.
// Returns false when the budget cannot take this sequence's work this step.
bool EngineCore::plan_work(const Sequence& s, int32_t budget, int32_t* n, int32_t* k) const {
  const int32_t pending = static_cast<int32_t>(s.tokens.size()) - s.n_computed;
  *k = 0;
  if (pending == 1) {
    const int32_t remaining = s.req.stop.max_tokens - s.n_generated;
    *k = std::max(0, std::min(opt_.speculative_k, remaining - 1));
    *n = 1 + *k;
    return *n <= budget;
  }
  const int32_t chunk = opt_.speculative_k > 0 ? pending - 1 : pending;
  *n = std::min(chunk, budget);
  return *n >= 1;
}

// ---- drafting ----

void EngineCore::draft_tokens(const std::vector<Sequence*>& batch) {
  int32_t max_k = 0;
  for (Sequence* s : batch) {
    s->drafts.clear();
    s->q.clear();
    max_k = std::max(max_k, s->step_drafts);
  }
  std::vector<RunnerToken> in;
  std::vector<Sequence*> who;
  for (int32_t j = 0; j < max_k; ++j) {
    in.clear();
    who.clear();
    for (Sequence* s : batch) {
      if (s->step_drafts <= j) continue;
      const int32_t tok = j == 0 ? s->tokens.back() : s->drafts.back();
      in.push_back({s->slot, s->n_computed + j, tok, true});
      who.push_back(s);
    }
    if (!runner_->draft(in, &scratch_).is_ok()) {  // no drafts this step; plain decoding stays exact
      for (Sequence* s : who) s->step_drafts = j;
      break;
    }
    const auto vocab = static_cast<size_t>(info_.vocab_size);
    for (size_t i = 0; i < who.size(); ++i) {
      Sequence& s = *who[i];
      std::span<const float> row(scratch_.data() + i * vocab, vocab);
      s.q.emplace_back();
      sampling_distribution(s.req.sampling, s.history, row, &s.q.back());
      const int64_t index = s.n_generated + j;
      const int32_t d = is_greedy(s.req.sampling) ? argmax(s.q.back())
                                                   : sample_from(s.q.back(), uniform_draw(s.seed, index, 1));
      s.drafts.push_back(d);
      s.history.add_output(d);  // the next draft position sees it, as the target will
    }
  }
  for (Sequence* s : batch) {
    for (int32_t d : s->drafts) s->history.remove_output(d);
    s->step_drafts = static_cast<int32_t>(s->drafts.size());
    if (static_cast<int32_t>(s->tokens.size()) - s->n_computed == 1) s->step_tokens = 1 + s->step_drafts;
  }
}

Status EngineCore::run_forward(const std::vector<Sequence*>& batch, std::vector<float>* logits) {
  std::vector<RunnerToken> in;
  for (Sequence* s : batch) {
    const int32_t end = s->n_computed + s->step_tokens;
    if (s->step_drafts > 0) {  // verify: the pending token and every draft, each with logits
      in.push_back({s->slot, s->n_computed, s->tokens.back(), true});
      for (int32_t j = 0; j < s->step_drafts; ++j) in.push_back({s->slot, s->n_computed + 1 + j, s->drafts[j], true});
      continue;
    }
    const bool last_known = end == static_cast<int32_t>(s->tokens.size());
    for (int32_t p = s->n_computed; p < end; ++p) {
      in.push_back({s->slot, p, s->tokens[static_cast<size_t>(p)], last_known && p == end - 1});
    }
  }
  const Status st = runner_->forward(in, logits);
  if (st.is_ok()) stats_.forward_tokens += static_cast<int64_t>(in.size());
  return st;
}

Status EngineCore::forward_with_retry(std::vector<Sequence*>* batch) {
  for (;;) {
    const Status st = run_forward(*batch, &logits_);
    if (st.code() != StatusCode::kResourceExhausted) return st;
    // The runner changed nothing. Cached prefixes go first (LRU), then the youngest running sequence,
    // in or out of the batch; the oldest is never preempted for memory, so it always progresses, and
    // only when it cannot run with nothing else held does its request fail.
    if (!donors_.empty()) {
      evict_donor();
    } else if (running_.size() > 1) {
      Sequence* victim = running_.back();
      std::erase(*batch, victim);
      preempt(*victim);
    } else {
      return st;
    }
    ++stats_.forward_retries;
    if (batch->empty()) return Status::ok();
  }
}

// ---- postprocess ----

void EngineCore::finish(Sequence& s, FinishReason reason, GenerationUpdate* update, Status error) {
  if (s.finished) return;
  s.finished = true;
  const bool donate = reason == FinishReason::kStop || reason == FinishReason::kLength;
  release_state(s, donate);
  if (s.running) {
    std::erase(running_, &s);
    s.running = false;
  } else {
    std::erase(waiting_, &s);
  }
  update->id = s.id;
  update->finish = reason;
  update->error = std::move(error);
  update->prompt_tokens = s.n_prompt;
  update->completion_tokens = s.n_generated;
}

// The text still held when a request ends without a stop string: the decoder's incomplete tail and
// what the stop matcher held back (unless that tail itself completes a stop string).
std::string EngineCore::end_text(Sequence& s) {
  bool stopped = false;
  std::string out = s.detok ? s.stop.push(s.detok->flush(), &stopped) : std::string();
  if (!stopped) out += s.stop.flush();
  return out;
}

bool EngineCore::emit_token(Sequence& s, int32_t token, const float* logits_row, GenerationUpdate* update) {
  ++s.n_generated;
  ++stats_.generated_tokens;
  TokenEvent ev;
  ev.token = token;
  if (s.req.sampling.top_logprobs >= 0) {
    TokenLogprob lp;
    compute_logprobs({logits_row, static_cast<size_t>(info_.vocab_size)}, token, s.req.sampling.top_logprobs, &lp,
                     &ev.top_logprobs);
    ev.logprob = lp;
  }
  const StopCriteria& stop = s.req.stop;
  const bool is_eos = !stop.ignore_eos && token == info_.eos_token_id;
  const bool is_stop_id = std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), token) !=
                          stop.stop_token_ids.end();
  if (is_eos || is_stop_id) {
    // The ending token's own text is never shown; text held back for stop strings is released on it.
    ev.text = end_text(s);
    update->tokens.push_back(std::move(ev));
    finish(s, FinishReason::kStop, update);
    return false;
  }
  s.tokens.push_back(token);
  s.history.add_output(token);
  bool stopped = false;
  if (s.detok) ev.text = s.stop.push(s.detok->push(token), &stopped);
  if (stopped) {
    update->tokens.push_back(std::move(ev));
    finish(s, FinishReason::kStop, update);
    return false;
  }
  if (s.n_generated >= stop.max_tokens) {
    ev.text += end_text(s);
    update->tokens.push_back(std::move(ev));
    finish(s, FinishReason::kLength, update);
    return false;
  }
  update->tokens.push_back(std::move(ev));
  return true;
}

void EngineCore::postprocess(Sequence& s, const float* rows) {
  const auto vocab = static_cast<size_t>(info_.vocab_size);
  GenerationUpdate update;
  update.id = s.id;
  std::vector<float> p;
  if (s.step_drafts == 0) {
    s.n_computed += s.step_tokens;
    if (s.n_computed < static_cast<int32_t>(s.tokens.size())) return;  // a prefill chunk, no logits yet
    sampling_distribution(s.req.sampling, s.history, {rows, vocab}, &p);
    const int32_t tok = is_greedy(s.req.sampling) ? argmax(p) : sample_from(p, uniform_draw(s.seed, s.n_generated, 0));
    emit_token(s, tok, rows, &update);
  } else {
    // Verify: row j predicts output index n_generated + j; accept drafts in order, stop at the first
    // rejection (its replacement is emitted); if all pass, row k gives a bonus token.
    // n_computed counts the fed tokens that are still valid: the pending one, then each accepted draft.
    s.n_computed += 1;
    bool alive = true;
    for (int32_t j = 0; j <= s.step_drafts && alive; ++j) {
      const float* row = rows + static_cast<size_t>(j) * vocab;
      sampling_distribution(s.req.sampling, s.history, {row, vocab}, &p);
      const int64_t index = s.n_generated;
      if (j == s.step_drafts) {
        const int32_t tok = is_greedy(s.req.sampling) ? argmax(p) : sample_from(p, uniform_draw(s.seed, index, 0));
        alive = emit_token(s, tok, row, &update);
        break;
      }
      const AcceptDecision d = accept_draft(s.req.sampling, p, s.q[static_cast<size_t>(j)], s.drafts[static_cast<size_t>(j)],
                                            uniform_draw(s.seed, index, 2), uniform_draw(s.seed, index, 3));
      stats_.spec.record(j, d.accepted);
      if (d.accepted) ++s.n_computed;
      alive = emit_token(s, d.token, row, &update);
      if (!d.accepted) break;
    }
    if (alive && runner_->length(s.slot) > s.n_computed) {
      const Status st = runner_->truncate(s.slot, s.n_computed);
      if (!st.is_ok()) finish(s, FinishReason::kError, &update, st);
    }
  }
  if (!s.finished) {  // blocks of a rejected tail go back
    const int32_t keep = plan_.blocks_for(s.n_computed);
    while (static_cast<int32_t>(s.blocks.size()) > keep) {
      pool_.release(s.blocks.back());
      s.blocks.pop_back();
    }
  }
  if (s.on_update && (!update.tokens.empty() || s.finished)) s.on_update(update);
}

Status EngineCore::step() {
  std::vector<Sequence*> batch;
  schedule(&batch);
  last_schedule_.clear();
  if (batch.empty()) return Status::ok();
  ++stats_.steps;
  if (opt_.speculative_k > 0) draft_tokens(batch);
  const Status st = forward_with_retry(&batch);
  for (Sequence* s : batch) last_schedule_.push_back({s->id, s->step_tokens, s->step_drafts});
  if (!st.is_ok()) {
    for (Sequence* s : batch) {
      GenerationUpdate update;
      finish(*s, FinishReason::kError, &update, st);
      if (s->on_update) s->on_update(update);
    }
  } else {
    size_t row = 0;
    const auto vocab = static_cast<size_t>(info_.vocab_size);
    for (Sequence* s : batch) {
      const float* rows = logits_.data() + row * vocab;
      const int32_t end = s->n_computed + s->step_tokens;
      if (s->step_drafts > 0) {
        row += static_cast<size_t>(1 + s->step_drafts);
      } else if (end == static_cast<int32_t>(s->tokens.size())) {
        row += 1;
      }
      postprocess(*s, rows);
    }
  }
  for (Sequence* s : batch) {
    if (s->finished) seqs_.erase(s->id);
  }
  return st;
}

}  // namespace dsv4
