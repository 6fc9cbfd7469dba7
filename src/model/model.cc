// model: Model — load, sequence state, batched forward and MTP (spec §2, §4).
#include "model/model.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "io/safetensors.h"
#include "model/tensor_layout.h"
#include "model/deepseek_v4/attention.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/mhc.h"
#include "model/deepseek_v4/mtp.h"

namespace dsv4 {
Result<std::unique_ptr<Model>> Model::load(const std::filesystem::path& dir, const ModelOptions& options) {
  if (options.threads < 0)
    return invalid_argument("model.threads", "thread count must be >= 0 (0 = one per CPU), got " +
                                                 std::to_string(options.threads));
  DSV4_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  // NUMA first: the plan decides where the weight pages go, which must be set before they are read.
  // --numa off reads no topology and keeps the pool and the kernel's placement exactly as they were.
  NumaTopology topology;
  NumaPlan plan;
  if (options.numa == NumaMode::kOff) {
    plan.n_threads = options.threads;
  } else {
    auto topo = read_numa_topology();
    if (!topo.is_ok())
      return Status(topo.status().code(), topo.status().rule(),
                    "reading the NUMA topology: " + topo.status().message() + " (--numa off skips it)");
    topology = std::move(*topo);
    DSV4_ASSIGN_OR_RETURN(plan, plan_numa(topology, options.numa, options.threads, current_cpu()));
  }
  CheckpointOptions residency = options.weights;
  residency.placement = plan.weights;
  if (options.backend == Backend::kReference && residency.residency == Residency::kAuto)
    residency.residency = Residency::kMmap;
  DSV4_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir, residency));
  // The whole tensor table first (names, dtypes, shapes), so a bad checkpoint names all its problems.
  DSV4_RETURN_IF_ERROR(check_checkpoint(cfg, ck).to_status(dir.string()));
  ck.set_progress(options.progress);  // after the check, which looks every tensor up without reading it
  auto shared_ck = std::make_shared<const Checkpoint>(std::move(ck));
  DSV4_ASSIGN_OR_RETURN(auto w, load_model_weights(std::move(shared_ck), cfg, options.backend));
  auto m = std::unique_ptr<Model>(new Model());
  m->options_ = options;
  m->pool_ = std::make_unique<ThreadPool>(plan.n_threads, plan.pinned() ? plan.thread_cpus : std::vector<std::vector<int>>{});
  plan.n_threads = m->pool_->n_threads();
  m->numa_plan_ = std::move(plan);
  m->numa_topology_ = std::move(topology);
  m->ctx_ = v4::ModelContext::make(cfg);
  m->ctx_.exec = {options.backend, m->pool_.get(), options.isa, options.amx};
  m->weights_ = std::move(w);
  DSV4_RETURN_IF_ERROR(m->configure_kv_pages(KvStorage::kFp8, 0));
  return m;
}

std::optional<std::map<int, uint64_t>> Model::weight_bytes_per_node() const {
  if (!weights_->checkpoint) return std::nullopt;
  const auto ranges = weights_->checkpoint->resident_ranges();
  return resident_bytes_per_node(ranges);
}

std::string Model::weights_summary() const {
  if (!weights_->checkpoint) return {};
  const ResidencyChoice& c = weights_->checkpoint->residency();
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s, %.2f GiB", resident_mode_name(c), static_cast<double>(c.file_bytes) / (1 << 30));
  std::string s = std::string(buf) + (c.populate ? " (populated)" : "") + ": " + c.reason;
  if (c.locked_bytes > 0) {
    std::snprintf(buf, sizeof(buf), "; %.2f GiB locked", static_cast<double>(c.locked_bytes) / (1 << 30));
    s += buf;
  }
  if (!c.lock_note.empty()) s += "; not locked: " + c.lock_note;
  return s;
}

std::string Model::placement_summary() const {
  std::string s = numa_topology_.nodes.empty() ? std::string("topology not read") : describe_topology(numa_topology_);
  s += "; " + describe_plan(numa_plan_);
  if (pool_->pin_failures() > 0) s += " (" + std::to_string(pool_->pin_failures()) + " threads could not be pinned)";
  if (weights_->checkpoint && !weights_->checkpoint->residency().placement_note.empty())
    s += " (not applied: " + weights_->checkpoint->residency().placement_note + ")";
  if (const auto per_node = weight_bytes_per_node()) {
    s += "; weights resident:";
    bool first = true;
    char buf[64];
    for (const auto& [node, bytes] : *per_node) {
      std::snprintf(buf, sizeof(buf), "%s node%d %.2f GiB", first ? "" : ",", node, static_cast<double>(bytes) / (1 << 30));
      s += buf;
      first = false;
    }
    if (per_node->empty()) s += " none yet";
  }
  return s;
}

int64_t Model::max_context() const {
  return ctx_.cfg.max_position_embeddings > 0 ? ctx_.cfg.max_position_embeddings : (int64_t{1} << 30);
}

Status Model::configure_kv_pages(KvStorage storage, int64_t max_bytes, int32_t page_rows) {
  if (pools_ && pools_->usage().bytes_in_use() > 0)
    return invalid_argument("model.kv_pages_in_use", "the state page pools can only change while no sequence holds pages");
  if (page_rows < 1 || max_bytes < 0 || storage == KvStorage::kFp4)
    return invalid_argument("model.kv_pages_config", "storage kFp8 or kF32, page_rows >= 1 and max_bytes >= 0");
  if (ctx_.cfg.index_head_dim % kIndexKeyBlock != 0)
    return invalid_argument("model.index_key_layout", "index_head_dim must be a multiple of 32");
  const KvRowLayout layout{ctx_.cfg.head_dim, ctx_.cfg.rope_head_dim};
  if (!layout.valid())
    return invalid_argument("model.kv_row_layout", "head_dim - rope_head_dim must be a positive multiple of 64");
  auto pools = std::make_unique<StatePools>();
  pools->budget = std::make_shared<PageBudget>(max_bytes);
  // Window rows are on the compressed rows' grid (RMSNorm_kv, RoPE'd bf16 tail, FP8-simulated nope
  // dims: spec §4), so the same FP8 layout stores them losslessly.
  pools->window = std::make_shared<KvPagePool>(layout, storage, page_rows, pools->budget);
  pools->main_rows = std::make_shared<KvPagePool>(layout, storage, page_rows, pools->budget);
  pools->index_keys = std::make_shared<KvPagePool>(KvRowLayout{ctx_.cfg.index_head_dim, 0},
                                                   storage == KvStorage::kF32 ? KvStorage::kF32 : KvStorage::kFp4,
                                                   page_rows, pools->budget);
  // One partial pool per compressor geometry, created now so new_sequence() only looks them up.
  auto add_partials = [&](const AttentionWeights& a) {
    for (const CompressorWeights* cw : {a.has_compressor ? &a.compressor : nullptr,
                                        a.has_indexer ? &a.indexer.compressor : nullptr}) {
      if (cw == nullptr) continue;
      pools->partial_pool(2 * (cw->overlap ? 2 : 1) * cw->head_dim, v4::partial_page_rows(cw->ratio));
    }
  };
  for (const auto& l : weights_->layers) add_partials(l.attn);
  for (const auto& m : weights_->mtp) add_partials(m.block.attn);
  pools_ = std::move(pools);
  return Status::ok();
}

std::unique_ptr<SequenceState> Model::new_sequence() const {
  auto st = std::make_unique<SequenceState>();
  st->layers.resize(weights_->layers.size());
  for (size_t il = 0; il < st->layers.size(); ++il)
    v4::attention_state_init(ctx_, weights_->layers[il].attn, pools_.get(), &st->layers[il]);
  st->mtp_layers.resize(weights_->mtp.size());
  for (size_t k = 0; k < st->mtp_layers.size(); ++k)
    v4::attention_state_init(ctx_, weights_->mtp[k].block.attn, pools_.get(), &st->mtp_layers[k]);
  return st;
}

// Bytes of pages the batch makes every table of the sequences allocate at its peak, so that a budgeted
// pool set is checked before any state changes.
Status Model::check_budget(std::span<SequenceState* const> states, const std::vector<int64_t>& next, bool mtp) const {
  const int64_t have = pools_->budget->available_bytes();
  if (pools_->budget->max_bytes() == 0) return Status::ok();
  int64_t need = 0;
  const auto add = [&need](const KvPageTable& t, int64_t rows) { need += t.pages_needed(rows) * t.pool().page_bytes(); };
  for (size_t s = 0; s < states.size(); ++s) {
    if (next[s] < 0) continue;
    const auto& layers = mtp ? states[s]->mtp_layers : states[s]->layers;
    for (size_t il = 0; il < layers.size(); ++il) {
      const AttentionWeights& w = mtp ? weights_->mtp[il].block.attn : weights_->layers[il].attn;
      const LayerState& l = layers[il];
      add(l.window, next[s]);
      if (w.has_compressor) {
        add(l.compressor.partial, next[s]);
        add(l.compressor.rows, next[s] / w.compressor.ratio);
      }
      if (w.has_indexer) {
        add(l.index_keys.partial, next[s]);
        add(l.index_keys.rows, next[s] / w.indexer.compressor.ratio);
      }
    }
  }
  if (need > have)
    return resource_exhausted("model.state_pages_exhausted", "the batch needs " + std::to_string(need) +
                                                                 " bytes of state pages, the budget has " +
                                                                 std::to_string(have) + " left");
  return Status::ok();
}

Status Model::validate(std::span<const BatchToken> batch, std::span<SequenceState* const> states, bool mtp,
                       std::vector<int64_t>* next_out) const {
  std::vector<int64_t>& next = *next_out;
  next.assign(states.size(), -1);
  for (size_t s = 0; s < states.size(); ++s)
    for (size_t t = 0; t < s; ++t)
      if (states[s] && states[s] == states[t])
        return invalid_argument("model.batch_state_alias", "two sequence ids share one SequenceState");
  for (size_t i = 0; i < batch.size(); ++i) {
    const BatchToken& b = batch[i];
    // Built only on an error: a warm step allocates nothing.
    const auto where = [i] { return "batch row " + std::to_string(i) + ": "; };
    if (b.seq < 0 || static_cast<size_t>(b.seq) >= states.size() || !states[static_cast<size_t>(b.seq)])
      return invalid_argument("model.batch_seq", where() + "sequence id " + std::to_string(b.seq) + " has no state");
    if (b.token < 0 || b.token >= ctx_.cfg.vocab_size)
      return invalid_argument("model.token_range", where() + "token id " + std::to_string(b.token) + " outside [0, " +
                                                       std::to_string(ctx_.cfg.vocab_size) + ")");
    int64_t& nx = next[static_cast<size_t>(b.seq)];
    const SequenceState& st = *states[static_cast<size_t>(b.seq)];
    if (nx < 0) nx = mtp ? st.n_mtp_tokens() : st.n_tokens();
    if (b.pos != nx)
      return invalid_argument("model.position_gap", where() + "position " + std::to_string(b.pos) + ", expected " +
                                                        std::to_string(nx) + " (positions must continue the sequence)");
    if (b.pos >= max_context())
      return out_of_range("model.context_length", where() + "position " + std::to_string(b.pos) +
                                                      " exceeds the context limit " + std::to_string(max_context()));
    ++nx;
  }
  return Status::ok();
}

int64_t Model::plan_rows(std::span<const BatchToken> batch, std::span<SequenceState* const> states, bool mtp) const {
  ForwardScratch& sc = scratch_;
  // Output row of each want_logits batch row (−1 otherwise).
  sc.out_row.resize(batch.size());
  int64_t n_out = 0;
  for (size_t i = 0; i < batch.size(); ++i) sc.out_row[i] = batch[i].want_logits ? n_out++ : -1;
  // Batch rows grouped by sequence, each group in batch order (a counting sort: validate() checked the ids).
  sc.seq_begin.assign(states.size() + 1, 0);
  for (const BatchToken& b : batch) ++sc.seq_begin[static_cast<size_t>(b.seq) + 1];
  for (size_t s = 0; s < states.size(); ++s) sc.seq_begin[s + 1] += sc.seq_begin[s];
  sc.order.resize(batch.size());
  sc.segs.clear();
  sc.seg_seq.clear();
  for (size_t s = 0; s < states.size(); ++s) {
    const int64_t n = sc.seq_begin[s + 1] - sc.seq_begin[s];
    if (n == 0) continue;
    sc.segs.push_back({nullptr, sc.seq_begin[s], n, mtp ? states[s]->n_mtp_tokens() : states[s]->n_tokens()});
    sc.seg_seq.push_back(s);
  }
  for (size_t i = 0; i < batch.size(); ++i)
    sc.order[static_cast<size_t>(sc.seq_begin[static_cast<size_t>(batch[i].seq)]++)] = static_cast<int64_t>(i);
  return n_out;
}

void Model::finish_rows(const float* H, int64_t n_out, const HcWeights& hc_head, const std::vector<float>& norm,
                        std::vector<float>* logits, ForwardCapture* capture) const {
  ForwardScratch& sc = scratch_;
  const int64_t hc_d = ctx_.cfg.hc_mult * ctx_.cfg.dim;
  sc.Hl.grow(n_out * hc_d);  // [n_out, hc, d]
  for (size_t i = 0; i < sc.order.size(); ++i) {
    const auto r = static_cast<size_t>(sc.order[i]);
    const float* row = H + static_cast<int64_t>(i) * hc_d;
    if (capture) std::copy_n(row, hc_d, capture->final_streams.data() + r * static_cast<size_t>(hc_d));
    if (logits && sc.out_row[r] >= 0) std::copy_n(row, hc_d, sc.Hl.data() + sc.out_row[r] * hc_d);
  }
  if (logits && n_out > 0) v4::head_logits(ctx_, hc_head, norm, weights_->head, sc.Hl.data(), n_out, logits->data());
  // Step scratch that this and the last few steps used much less of goes back (a prefill's, once decode
  // runs); pool workers follow after their next job.
  scratch_end_step();
}

Status Model::forward(std::span<const BatchToken> batch, std::span<SequenceState* const> states_by_seq,
                      std::vector<float>* logits, ForwardCapture* capture, ForwardTrace* trace) const {
  std::lock_guard<std::mutex> lock(forward_mu_);  // also guards scratch_
  ForwardScratch& sc = scratch_;
  DSV4_RETURN_IF_ERROR(validate(batch, states_by_seq, /*mtp=*/false, &sc.next));
  const ModelConfig& c = ctx_.cfg;
  const int64_t d = c.dim, hc = c.hc_mult, V = c.vocab_size;
  const int64_t n_out = plan_rows(batch, states_by_seq, /*mtp=*/false);
  const auto& order = sc.order;  // row r of H = batch row order[r]: each sequence's rows back to back
  auto& segs = sc.segs;
  if (trace) {
    if (segs.size() > 1) return invalid_argument("model.trace_batch", "a traced forward takes a single sequence");
    trace->layers.assign(static_cast<size_t>(c.n_layers), {});
  }
  DSV4_RETURN_IF_ERROR(check_budget(states_by_seq, sc.next, /*mtp=*/false));  // under the lock: no one allocates
  if (logits) logits->assign(static_cast<size_t>(n_out * V), 0.0f);
  if (capture) capture->final_streams.assign(batch.size() * static_cast<size_t>(hc * d), 0.0f);
  const auto n = static_cast<int64_t>(order.size());
  // H [n, hc, d]: embed[ids] repeated over the hc streams (spec §2.1); rows decoded as gathered.
  sc.tokens.resize(order.size());
  int32_t* tokens = sc.tokens.data();
  float* H = sc.H.grow(n * hc * d);
  for (int64_t i = 0; i < n; ++i) {
    tokens[i] = batch[static_cast<size_t>(order[static_cast<size_t>(i)])].token;
    float* h0 = H + i * hc * d;
    weights_->embed.row(tokens[i], h0);
    for (int64_t j = 1; j < hc; ++j) std::copy_n(h0, d, h0 + j * d);
  }
  for (int64_t il = 0; il < c.n_layers; ++il) {
    for (size_t k = 0; k < segs.size(); ++k) segs[k].state = &states_by_seq[sc.seg_seq[k]]->layers[static_cast<size_t>(il)];
    v4::block_forward(ctx_, il, weights_->layers[static_cast<size_t>(il)], segs, H, tokens, n,
                      trace ? &trace->layers[static_cast<size_t>(il)] : nullptr);
  }
  for (size_t k = 0; k < segs.size(); ++k) states_by_seq[sc.seg_seq[k]]->n_tokens_ += segs[k].n;
  // The head once for every row that wants logits: [n_want, hc, d] → [n_want, V] in batch order.
  finish_rows(H, n_out, weights_->hc_head, weights_->norm, logits, capture);
  return Status::ok();
}

Status Model::forward_mtp(std::span<const BatchToken> batch, std::span<const float> final_streams,
                          std::span<SequenceState* const> states_by_seq, std::vector<float>* logits,
                          ForwardCapture* capture) const {
  const ModelConfig& c = ctx_.cfg;
  if (weights_->mtp.empty()) return unimplemented("model.no_mtp", "this checkpoint has no MTP module");
  const int64_t d = c.dim, hc = c.hc_mult, V = c.vocab_size;
  if (final_streams.size() != batch.size() * static_cast<size_t>(hc * d))
    return invalid_argument("model.mtp_streams", "final_streams must hold [n_batch, hc_mult, dim] values");
  std::lock_guard<std::mutex> lock(forward_mu_);  // also guards scratch_
  ForwardScratch& sc = scratch_;
  DSV4_RETURN_IF_ERROR(validate(batch, states_by_seq, /*mtp=*/true, &sc.next));
  // Layer-major like forward: the MTP block's attention per sequence, everything else over all rows.
  const int64_t n_out = plan_rows(batch, states_by_seq, /*mtp=*/true);
  const auto& order = sc.order;  // row r = batch row order[r]
  auto& segs = sc.segs;
  for (size_t k = 0; k < segs.size(); ++k) segs[k].state = &states_by_seq[sc.seg_seq[k]]->mtp_layers[0];
  DSV4_RETURN_IF_ERROR(check_budget(states_by_seq, sc.next, /*mtp=*/true));
  if (logits) logits->assign(static_cast<size_t>(n_out * V), 0.0f);
  if (capture) capture->final_streams.assign(batch.size() * static_cast<size_t>(hc * d), 0.0f);
  const auto n = static_cast<int64_t>(order.size());
  sc.tokens.resize(order.size());  // the next tokens
  float* H = sc.H.grow(n * hc * d);
  for (int64_t i = 0; i < n; ++i) {
    const auto r = static_cast<size_t>(order[static_cast<size_t>(i)]);
    sc.tokens[static_cast<size_t>(i)] = batch[r].token;
    std::copy_n(final_streams.data() + r * static_cast<size_t>(hc * d), hc * d, H + i * hc * d);
  }
  v4::mtp_forward(ctx_, 0, *weights_, segs, H, sc.tokens.data(), n, nullptr);
  for (size_t k = 0; k < segs.size(); ++k) states_by_seq[sc.seg_seq[k]]->n_mtp_tokens_ += segs[k].n;
  // The MTP head only on the rows that want logits.
  const MtpWeights& mw = weights_->mtp[0];
  finish_rows(H, n_out, mw.hc_head, mw.norm, logits, capture);
  return Status::ok();
}

}  // namespace dsv4

namespace dsv4 {

Result<std::vector<int32_t>> parse_token_ids(std::string_view text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    const char ch = text[i];
    if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == ',') {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] >= '0' && text[j] <= '9') ++j;
    if (j == i || j - i > 9 || (j < text.size() && !(text[j] == ' ' || text[j] == '\n' || text[j] == '\t' ||
                                                     text[j] == '\r' || text[j] == ',')))
      return invalid_argument("model.token_ids", "token ids must be non-negative decimal integers, got '" +
                                                     std::string(text.substr(i, std::min<size_t>(16, text.size() - i))) + "'");
    ids.push_back(static_cast<int32_t>(std::stol(std::string(text.substr(i, j - i)))));
    i = j;
  }
  return ids;
}

}  // namespace dsv4
