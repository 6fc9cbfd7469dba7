// runtime: the ModelRunner over the real forward pass (model/model.h). Sequences are SequenceStates
// owned here; truncate() is exact by snapshot + replay: before each forward the window and partial-block
// tables of every fed sequence are copied (copies share pages, copy-on-write: no row is copied) and the
// compressed-row and key counts noted; a rollback puts the tables back, truncates the append-only rows
// and keys to the counts and re-runs the kept tokens. The MTP state lags the main state by one position (it needs the next token)
// and is caught up after every forward; draft steps run on it and are undone before the next forward.
// Prefix reuse: with checkpoints on, a sequence keeps an immutable copy of its state at every multiple of
// the checkpoint interval (shared by the copies a prefix hit makes), so copy_prefix() restores the nearest
// one at or before the hit and replays at most one interval of tokens.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/model_runner.h"

namespace dsv4 {

// Bytes of state this model holds per sequence and per token, by kind, in the layouts of its pools:
// compressed main rows FP8 and indexer keys packed FP4 (core/kv_row.h, rounded up per layer) plus one
// page of slack per table; window rows FP8, the pages of the last window_size rows (at most
// ceil(window / page) + 1 per layer); compressor partial rows fp32, the open block(s) only. Exposed for
// the pool plan and for tests.
StateFootprint model_state_footprint(const ModelConfig& cfg, int32_t kv_page_rows = kKvPageRows);

// Tokens between prefix-reuse checkpoints: the smallest multiple of the window and of every compression
// ratio that is at least 256. At such a position every compressor's open block is empty and the window
// ring starts a fresh lap, so a checkpoint holds only the ring and the finished rows (the rows shared with
// the sequence); 256 tokens of replay is one default prefill chunk, and a checkpoint's fixed-size copy is
// paid once per 256 tokens of rows it stands for.
int32_t default_checkpoint_interval(const ModelConfig& cfg);

// Bytes one prefix-reuse checkpoint (a copy of the state every `interval` tokens) can come to hold that
// no live sequence shares, the most over every checkpoint position below `max_context`: the pages of its
// window rows (the sequence slides out of them), its compressor partial blocks, a partly filled last page
// of each table of rows and keys (the sequence copies it on write), and its copy of the MTP streams. Its
// finished rows stay shared with the sequences that cover them. An upper bound, taken from the page
// geometry at the checkpoint positions rather than from the per-sequence footprint (which assumes the
// worst window alignment and a partly filled last page everywhere).
int64_t checkpoint_state_bytes(const ModelConfig& cfg, int32_t kv_page_rows, int64_t interval, int64_t max_context);

class ModelModelRunner : public ModelRunner {
 public:
  // `max_rollback`: deepest truncate() accepted (bounded by what the last forward fed anyway).
  explicit ModelModelRunner(std::unique_ptr<Model> model, int32_t max_rollback = 8);
  static Result<std::unique_ptr<ModelModelRunner>> load(const std::filesystem::path& dir,
                                                         const ModelOptions& options = {});

  const RunnerInfo& info() const override { return info_; }
  RunnerMemory memory() const override;
  // The byte budget of all the model's page pools (Model::set_state_budget), at any time.
  Status set_state_budget(int64_t bytes) override;
  void keep_checkpoints(bool on) override;
  // Tests: the interval used while checkpoints are on (>= 1; default_checkpoint_interval() by default).
  void set_checkpoint_interval(int32_t n_tokens);
  Result<SeqSlot> create_sequence() override;
  void free_sequence(SeqSlot seq) override;
  int32_t length(SeqSlot seq) const override;
  Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) override;
  Status truncate(SeqSlot seq, int32_t new_len) override;
  Status copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) override;
  Status draft(std::span<const RunnerToken> batch, std::vector<float>* logits) override;

  const Model& model() const { return *model_; }
  // Tokens re-run to rebuild state (truncate and copy_prefix; copy_prefix alone), and checkpoints held
  // (shared ones once).
  int64_t replayed_tokens() const { return replayed_tokens_; }
  int64_t prefix_replayed_tokens() const { return prefix_replayed_tokens_; }
  int64_t checkpoints_held() const;

 private:
  struct Snapshot {
    std::vector<LayerState> layers;      // window + partial copies, entry counts; empty: MTP part only
    std::vector<LayerState> mtp_layers;
    int64_t n_tokens = 0;
    int64_t n_mtp_tokens = 0;
  };
  // The whole state after the first n_tokens tokens; immutable once taken.
  struct Checkpoint {
    int64_t n_tokens = 0;
    SequenceState state;        // shares every page with the sequence (copy-on-write)
    std::vector<float> last_h;  // [hc_mult, dim] final streams at position n_tokens - 1
  };
  // What a forward must put back if it fails halfway (all or nothing).
  struct Undo {
    Snapshot snap;
    std::vector<float> last_h;
    size_t n_tokens = 0;
    size_t n_checkpoints = 0;
  };
  struct Seq {
    bool live = false;
    std::unique_ptr<SequenceState> state;
    std::vector<int32_t> tokens;   // every token the main state consumed
    std::vector<float> last_h;     // [hc_mult, dim] final streams at position n_tokens - 1
    bool has_snap = false;         // state before the last forward
    Snapshot snap;
    std::vector<float> snap_last_h;
    bool drafting = false;         // MTP state advanced by draft steps; `draft_snap` undoes them
    Snapshot draft_snap;
    std::vector<float> draft_h;    // [hc_mult, dim] MTP output streams of the last draft step
    std::vector<std::shared_ptr<const Checkpoint>> checkpoints;  // increasing n_tokens
  };

  Snapshot take(const SequenceState& st, bool main_too) const;
  // Moves the snapshot back into the state (s is left empty).
  void restore(Snapshot& s, SequenceState* st, bool main_too) const;
  void end_draft(Seq& s);
  Status check(SeqSlot seq, const char* what) const;
  // The main forward plus the MTP catch-up, split where a sequence reaches a checkpoint position; on
  // error every sequence of the batch is back where it was. Keeps the pre-call state for truncate()
  // when `snapshot`.
  Status run(std::span<const RunnerToken> batch, std::vector<float>* logits, bool snapshot);
  // One piece of run(): forward, MTP catch-up, kept tokens and streams.
  Status run_segment(std::span<const RunnerToken> batch, std::vector<float>* logits);
  Status copy_state(Seq& d, Seq& s, SeqSlot dst, int32_t len);
  // Replays tokens [from, to) of `tokens` into slot `seq` (whose state has length `from`).
  Status replay(SeqSlot seq, const std::vector<int32_t>& tokens, int64_t from, int64_t to);

  std::unique_ptr<Model> model_;
  RunnerInfo info_;
  bool has_mtp_ = false;
  std::vector<Seq> seqs_;
  int64_t replayed_tokens_ = 0;
  int64_t prefix_replayed_tokens_ = 0;
  bool checkpoints_on_ = false;
  int32_t checkpoint_interval_ = 0;
};

}  // namespace dsv4
