// model: the DeepSeek-V4-Flash model (spec §2, §4): load a checkpoint directory for a backend (the cpu
// kernels on the mapped checkpoint, or the fp32 reference oracle), create per-sequence state, and run a
// flat batch of tokens. Rows of different sequences never interact in attention; projections and MoE
// run over the whole batch. Batch invariance (a row's numbers do not depend on the other rows): always on
// the reference backend; on the cpu backend while every weight takes one kernel path for the batch sizes
// compared. Each path (the AVX-512 tiles, or AMX) is itself invariant: a row's result depends only on that
// row. Without AMX (ModelOptions::isa below kAmx, or a CPU without it) that is every batch. With AMX the
// path is chosen per weight role by ModelOptions::amx (kernels::AmxRouting): by default dense projections
// (attention, indexer, compressors, gate, shared expert, head, MTP) run on AMX at every row count, and the
// routed experts on the vector tiles below 16 rows of a step (AMX from 16, another summation order), so
// any two batches under 16 rows agree; AmxRouting{1, 1} puts every weight on AMX: invariant at every size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "core/numa.h"
#include "core/scratch.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "model/deepseek_v4/block.h"
#include "model/deepseek_v4/context.h"
#include "model/sequence_state.h"
#include "model/weights.h"

namespace dsv4 {

// One token of a batch. Within one call, each sequence's tokens appear in position order and continue
// its state: the first has pos == state.n_tokens(), the next pos+1, and so on.
struct BatchToken {
  int32_t seq = 0;    // index into states_by_seq
  int32_t pos = 0;    // absolute position in the sequence
  int32_t token = 0;  // token id (for MTP: the token after pos)
  bool want_logits = false;
};

// Optional output of Model::forward: the final residual streams (the input of hc_head), what the MTP
// module consumes. [n_batch, hc_mult, dim] in batch order.
struct ForwardCapture {
  std::vector<float> final_streams;
};

// Optional per-layer record of a single-sequence forward (the golden intermediates).
struct ForwardTrace {
  std::vector<v4::BlockTrace> layers;
};

// The residency a model loads with unless told otherwise: auto, populated (ModelOptions::weights).
inline CheckpointOptions model_checkpoint_options() {
  CheckpointOptions o;
  o.residency = Residency::kAuto;
  o.populate = true;
  return o;
}

struct ModelOptions {
  Backend backend = Backend::kCpu;
  int threads = 0;                         // the model's thread pool, calling thread included; 0 = one per CPU
  // NUMA placement of the pool's threads and the weights (core/numa.h): auto = distribute on a machine
  // with several nodes (threads spread and pinned per node, weight pages interleaved), off on one.
  NumaMode numa = NumaMode::kAuto;
  kernels::Isa isa = kernels::Isa::kAuto;  // cpu backend: the kernels' ISA (tests, bench, batch invariance)
  kernels::AmxRouting amx;                 // cpu backend with AMX: which weight roles take it from how many rows
  // Optional loading progress (a progress bar): (bytes of weights reached, total bytes) as the loader
  // reaches each tensor (Checkpoint::set_progress).
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
  // How the checkpoint is resident (io/safetensors.h). Default: auto with populate — on 2 MiB pages
  // when the weights fit comfortably in available memory (a PMD-mapped page cache where it holds 2 MiB
  // folios, else a copy), else a lazy mapping. The reference backend decodes every linear to fp32 at
  // load, so for it auto means mmap (a copy would only add a read of the checkpoint).
  CheckpointOptions weights = model_checkpoint_options();
};

class Model {
 public:
  // DIR holds config.json (+ inference/config.json) and the safetensors checkpoint.
  static Result<std::unique_ptr<Model>> load(const std::filesystem::path& dir, const ModelOptions& options = {});

  const ModelOptions& options() const { return options_; }
  int threads() const { return pool_->n_threads(); }
  // The NUMA plan the model runs under (mode, threads per node, weight placement) and the topology it was
  // made from (empty nodes with --numa off, which reads no topology).
  const NumaPlan& numa_plan() const { return numa_plan_; }
  const NumaTopology& numa_topology() const { return numa_topology_; }
  // The weights' resident bytes per node id (/proc/self/numa_maps over the checkpoint's shards); nullopt
  // where the kernel does not say.
  std::optional<std::map<int, uint64_t>> weight_bytes_per_node() const;
  // One line for startup output: topology, plan, and where the weights are resident, e.g. "2 nodes: node0
  // cpus 0-15 (16), node1 cpus 16-31 (16); distribute: 32 threads (16 on node0, 16 on node1), weights
  // interleave over nodes 0-1; weights resident: node0 5.20 GiB, node1 5.20 GiB".
  std::string placement_summary() const;
  // How the weights are held and why (io/residency_policy.h), one line for startup output:
  // "copy, 10.43 GiB: auto: copy (...)"; a mapping's locked bytes and lock failure are added.
  std::string weights_summary() const;

  const ModelConfig& config() const { return ctx_.cfg; }
  const v4::ModelContext& context() const { return ctx_; }
  const ModelWeights& weights() const { return *weights_; }
  // Longest sequence the model accepts (max_position_embeddings).
  int64_t max_context() const;

  // Every kind of per-sequence state lives in pages of the model's pools (spec §4): window rows and
  // compressed main rows FP8 (core/kv_row.h), indexer keys packed FP4, compressor partial-block rows
  // fp32 (only the open blocks). All pools draw from one byte budget. Copying a SequenceState shares
  // its pages (copy-on-write), so snapshots and prefix copies cost no row copies.
  std::unique_ptr<SequenceState> new_sequence() const;
  const KvPagePool& kv_pages() const { return *pools_->main_rows; }
  const KvPagePool& index_pages() const { return *pools_->index_keys; }
  const KvPagePool& window_pages() const { return *pools_->window; }
  // Pages and bytes in use / held, per kind of state, and the budget.
  StateMemory state_memory() const { return pools_->usage(); }
  // Replaces the pools: kFp8 (window and main rows FP8, indexer keys FP4) or kF32 (all verbatim fp32);
  // `max_bytes`: the byte budget of all pools together (0 = unlimited); `page_rows`: rows per page of
  // the window, main-row and key pools. kInvalidArgument while any sequence still holds pages.
  Status configure_kv_pages(KvStorage storage, int64_t max_bytes, int32_t page_rows = kKvPageRows);
  // Sets the byte budget of all pools (0 = unlimited) at any time; below the bytes in use, forwards that
  // need pages fail until enough are released. Thread-safe.
  void set_state_budget(int64_t max_bytes) const { pools_->budget->set_max_bytes(max_bytes); }
  // A forward (or forward_mtp) that needs more bytes of pages than the budget has left fails with
  // kResourceExhausted (rule "model.state_pages_exhausted") before touching any state. The need is the
  // peak, over the batch, of the pages each page table allocates net of those its sliding frees.

  // Runs the batch (const: the model is immutable after load); logits (if not null) receives
  // [n_want_logits, vocab] in batch order. Calls from several threads are serialized (they share the
  // thread pool). On error nothing has changed: every check happens before any state is touched.
  // Results do not depend on the thread count.
  Status forward(std::span<const BatchToken> batch, std::span<SequenceState* const> states_by_seq,
                 std::vector<float>* logits, ForwardCapture* capture = nullptr, ForwardTrace* trace = nullptr) const;

  // MTP (spec §2.11): batch[i].pos = i (the main position whose final streams are given), batch[i].token =
  // the token at i+1; final_streams [n_batch, hc_mult, dim]. logits: [n_want_logits, vocab], predicting
  // the token at pos+2. Uses the sequences' own MTP window state (consecutive positions, like forward).
  // capture (optional) receives the MTP block's output streams [n_batch, hc_mult, dim] (the input of its
  // hc_head), which a multi-step drafter feeds back as the next step's hidden input.
  Status forward_mtp(std::span<const BatchToken> batch, std::span<const float> final_streams,
                     std::span<SequenceState* const> states_by_seq, std::vector<float>* logits,
                     ForwardCapture* capture = nullptr) const;

 private:
  // `next[s]`: sequence s's length after the batch (−1: not in it).
  Status validate(std::span<const BatchToken> batch, std::span<SequenceState* const> states, bool mtp,
                  std::vector<int64_t>* next) const;
  Status check_budget(std::span<SequenceState* const> states, const std::vector<int64_t>& next, bool mtp) const;
  // Fills scratch_'s out_row (returns the logits row count), order, segs and seg_seq (states unset);
  // start of each segment: the sequence's length (mtp: its MTP length).
  int64_t plan_rows(std::span<const BatchToken> batch, std::span<SequenceState* const> states, bool mtp) const;
  // The end of forward / forward_mtp: the final streams H [n, hc, d] (rows in scratch_.order) → capture's
  // final streams in batch order, and the head (hc_head, norm) on the n_out rows that want logits; then
  // ends the step for the scratch buffers.
  void finish_rows(const float* H, int64_t n_out, const HcWeights& hc_head, const std::vector<float>& norm,
                   std::vector<float>* logits, ForwardCapture* capture) const;

  ModelOptions options_;
  std::unique_ptr<ThreadPool> pool_;
  NumaPlan numa_plan_;
  NumaTopology numa_topology_;
  v4::ModelContext ctx_;
  std::unique_ptr<ModelWeights> weights_;
  std::unique_ptr<StatePools> pools_;
  mutable std::mutex forward_mu_;
  // A forward's bookkeeping and activations, reused under forward_mu_ so a warm step does not allocate:
  // vectors only grow (to the largest batch seen); the activations are ScratchVecs, which the end of each
  // forward trims once steps keep using much less (core/scratch.h).
  struct ForwardScratch {
    std::vector<int64_t> next;        // [n_seqs] length after the batch, −1: not in it
    std::vector<int64_t> out_row;     // [n_batch] logits row of each batch row, −1: none
    std::vector<int64_t> seq_begin;   // [n_seqs + 1] start of each sequence's rows in `order`
    std::vector<int64_t> order;       // [n_batch] row r of H = batch row order[r]
    std::vector<v4::BlockSegment> segs;
    std::vector<size_t> seg_seq;      // sequence id of each segment
    std::vector<int32_t> tokens;      // [n_batch] in H's row order
    ScratchVec<float> H, Hl;          // [n_batch, hc, d], [n_want_logits, hc, d]
  };
  mutable ForwardScratch scratch_;
};

}  // namespace dsv4

namespace dsv4 {
// Token ids written as decimal integers separated by whitespace or commas (`dsv4 logits --ids`, generate).
Result<std::vector<int32_t>> parse_token_ids(std::string_view text);
}  // namespace dsv4
