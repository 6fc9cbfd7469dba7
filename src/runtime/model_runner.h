// runtime: the model as the runtime sees it. A flat batch of (seq, pos, token, want_logits) in, logits
// rows out; per-sequence state created, freed, copied and rolled back by the runner. The scheduler,
// sampler, speculative decoder and prefix cache are written against this interface only, so every one
// of them is tested with a deterministic fake (runtime/testing/fake_model_runner.h) before the real
// forward pass is plugged in (runtime/model_model_runner.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace dsv4 {

// A runner-side sequence slot, handed out by create_sequence().
using SeqSlot = int32_t;

// One token of a batch. Tokens of one sequence appear in increasing `pos` order and continue exactly
// where that sequence's state ends (pos == length(seq) for the first one).
struct RunnerToken {
  SeqSlot seq = 0;
  int32_t pos = 0;
  int32_t token = 0;
  bool want_logits = false;
};

// Bytes of per-sequence state, split by the kinds of spec §4, summed over all layers (MTP included).
// `*_per_token` grows with the sequence; `*_per_seq` is paid once per live sequence.
struct StateFootprint {
  int64_t window_ring_per_seq = 0;          // SWA window rows per layer (FP8 pages of the last window_size rows)
  int64_t compressed_main_per_token = 0;    // CSA/HCA compressed rows (FP8, 584 B at 512 dims) / ratio
  int64_t compressed_indexer_per_token = 0; // CSA indexer keys (packed FP4 + ue8m0, 68 B at 128 dims) / 4
  int64_t compressor_partial_per_seq = 0;   // compressor kv/score f32 rows of the open block(s) (main + indexer)
  int64_t kv_page_slack_per_seq = 0;        // paged rows/keys: at most one partly filled page per table
  int64_t per_token() const { return compressed_main_per_token + compressed_indexer_per_token; }
  int64_t per_seq() const { return window_ring_per_seq + compressor_partial_per_seq + kv_page_slack_per_seq; }
};

// What the runner's state pages really hold right now (all sequences, snapshots and cached prefixes
// included), per kind of state; every kind draws from one byte budget (set_state_budget). A runner
// without page pools reports zeros.
struct RunnerMemory {
  // Compressed main rows (FP8).
  int64_t kv_page_bytes = 0;    // bytes of one page
  int64_t kv_pages_in_use = 0;  // pages some sequence holds (a shared page counts once)
  int64_t kv_pages_held = 0;    // pages whose memory is allocated (in use + free for reuse)
  // Indexer keys (packed FP4).
  int64_t index_page_bytes = 0;
  int64_t index_pages_in_use = 0;
  int64_t index_pages_held = 0;
  // Window rows (FP8) and compressor partial-block rows (fp32, pools of several page sizes: bytes).
  int64_t window_pages_in_use = 0;
  int64_t window_bytes_in_use = 0;
  int64_t window_bytes_held = 0;
  int64_t partial_pages_in_use = 0;
  int64_t partial_bytes_in_use = 0;
  int64_t partial_bytes_held = 0;
  int64_t budget_bytes = 0;  // the budget of all kinds together; 0 = unlimited
  // Step scratch (activation buffers) of every thread of the process, trimmed a few steps after a large
  // prefill (core/scratch.h). Not state: outside the budget.
  int64_t scratch_bytes_held = 0;
  int64_t kv_bytes_in_use() const { return kv_pages_in_use * kv_page_bytes + index_pages_in_use * index_page_bytes; }
  int64_t kv_bytes_held() const { return kv_pages_held * kv_page_bytes + index_pages_held * index_page_bytes; }
  // All kinds together.
  int64_t bytes_in_use() const { return kv_bytes_in_use() + window_bytes_in_use + partial_bytes_in_use; }
  int64_t bytes_held() const { return kv_bytes_held() + window_bytes_held + partial_bytes_held; }
};

struct RunnerInfo {
  std::string model_name;
  int32_t vocab_size = 0;
  int64_t context_size = 0;
  int32_t bos_token_id = 0;
  int32_t eos_token_id = 1;
  // Largest number of trailing tokens truncate() can drop exactly. Speculative decoding with k drafts
  // needs k (the verify step feeds k+1 tokens and keeps at least 1).
  int32_t max_rollback = 0;
  bool has_mtp = false;  // draft() is available
  StateFootprint footprint;
  // Prefix reuse (keep_checkpoints(true)): the sequence keeps a restorable copy of its state every
  // `checkpoint_interval` tokens, so copy_prefix() replays at most that many tokens from its kept tokens;
  // each copy costs at most `checkpoint_bytes` (0 interval: no checkpoints, a copy far behind the
  // source's end replays its whole prefix).
  int32_t checkpoint_interval = 0;
  int64_t checkpoint_bytes = 0;
  // Where the model's threads run and its weights live (NUMA nodes, plan, resident bytes per node), one
  // line for startup output; empty where the runner has no such notion.
  std::string placement;
  // How the weights are held in memory and why (Model::weights_summary), one line; empty where unknown.
  std::string weights;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const RunnerInfo& info() const = 0;
  virtual RunnerMemory memory() const { return {}; }
  // Binds the memory of every sequence's state (checkpoints included) to `bytes` (0 = unlimited): a
  // forward() that would need more fails with kResourceExhausted and changes nothing. The model runner
  // takes it at any time (below the bytes in use, forwards that need pages fail until enough are freed).
  // Runners without a bounded store accept any budget.
  virtual Status set_state_budget(int64_t bytes) {
    (void)bytes;
    return Status::ok();
  }
  // Turns the prefix-reuse checkpoints on or off (info().checkpoint_interval reads 0 when off). Called
  // while no sequence exists. Runners that copy prefixes cheaply anyway ignore it.
  virtual void keep_checkpoints(bool on) { (void)on; }

  // A fresh, empty sequence state (length 0). kResourceExhausted when the runner has no slot left.
  virtual Result<SeqSlot> create_sequence() = 0;
  virtual void free_sequence(SeqSlot seq) = 0;
  // Tokens whose state the sequence holds.
  virtual int32_t length(SeqSlot seq) const = 0;

  // Runs the batch. `logits` receives one [vocab] row per token with want_logits, in batch order:
  // [n_logits, vocab]. The logits of a row depend only on that sequence's history (batch invariance).
  virtual Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) = 0;

  // Exact rollback: the state becomes what a run that only ever saw the first `new_len` tokens has.
  // Needs length - new_len <= info().max_rollback (the ring and compressor rows overwritten since are
  // still held); the MTP draft state is rolled back too.
  virtual Status truncate(SeqSlot seq, int32_t new_len) = 0;

  // `dst` (an empty sequence) becomes exactly the state of `src` after its first `len` tokens; used by
  // the prefix cache. Any len <= length(src) is allowed: a copy ending mid-window or mid-compression-block
  // is rebuilt exactly (the runner may recompute the tail from tokens it kept: at most
  // info().checkpoint_interval of them when checkpoints are kept). On error `dst` is left empty.
  virtual Status copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) = 0;

  // One MTP draft step for each listed sequence (spec §2.11): the draft head consumes `token` at `pos`
  // (its hidden input is the main model's output at pos-1 when pos == length(seq), else its own output
  // from the previous draft step of this sequence) and returns logits predicting pos+1, one [vocab]
  // row per entry. Draft steps never change what forward() computes; they are discarded by the next
  // forward or truncate of the sequence.
  virtual Status draft(std::span<const RunnerToken> batch, std::vector<float>* logits) = 0;
};

}  // namespace dsv4
