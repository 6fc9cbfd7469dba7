// runtime (test support): a deterministic fake model with the same kinds of per-sequence state as the
// real one (spec §4): a window ring, append-only compressed rows, a compressor partial block, and an
// MTP draft head. Every row hashes everything before it, so the logits of a position depend on the
// whole history: any cross-sequence mix-up, wrong rollback, wrong position or wrong prefix state
// changes the output. Deliberate defects (`Defect`) turn it into negative controls for the tests.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/model_runner.h"

namespace dsv4::testing {

struct FakeModelOptions {
  int32_t vocab_size = 64;
  int32_t window = 8;           // ring rows a position sees
  int32_t ratio = 4;            // tokens per compressed row
  int32_t max_rollback = 16;    // the ring and compressor keep this many extra rows for truncate()
  int32_t max_seqs = 256;
  int64_t context_size = 4096;
  int32_t eos_token_id = 1;
  // Probability (in percent) that a draft row's argmax differs from the main model's.
  int32_t draft_miss_percent = 40;
  // Sharpness: the preferred token of each row gets this logit bonus.
  float peak = 2.5f;
  enum class Defect {
    kNone,
    kBatchLeak,          // each row's logits also depend on the first token of the batch
    kStaleTruncate,      // truncate() forgets to rebuild the compressor partial block
    kForgetfulCopy,      // copy_prefix() copies the compressed rows but not the window ring
  };
  Defect defect = Defect::kNone;
};

class FakeModelRunner : public ModelRunner {
 public:
  explicit FakeModelRunner(FakeModelOptions options = {});

  const RunnerInfo& info() const override { return info_; }
  // The fake's memory is its footprint: per_seq() + per_token() x length for each live sequence. With a
  // budget, a forward or a copy_prefix that would grow it past the budget fails with kResourceExhausted,
  // changing nothing (a copy holds its own rows, as the real runner's replayed copy holds its own pages).
  Status set_state_budget(int64_t bytes) override;
  int64_t state_bytes() const;
  Result<SeqSlot> create_sequence() override;
  void free_sequence(SeqSlot seq) override;
  int32_t length(SeqSlot seq) const override;
  Status forward(std::span<const RunnerToken> batch, std::vector<float>* logits) override;
  Status truncate(SeqSlot seq, int32_t new_len) override;
  Status copy_prefix(SeqSlot dst, SeqSlot src, int32_t len) override;
  Status draft(std::span<const RunnerToken> batch, std::vector<float>* logits) override;

  // Counters for tests: tokens run through forward (prefill + decode + verify), draft steps.
  int64_t forward_tokens() const { return forward_tokens_; }
  int64_t forward_calls() const { return forward_calls_; }
  int64_t replayed_tokens() const { return replayed_tokens_; }
  int32_t live_sequences() const { return live_; }
  int64_t refused_forwards() const { return refused_forwards_; }
  int64_t refused_copies() const { return refused_copies_; }

 private:
  // The state one position summary reads; the MTP draft scratch is a copy of it.
  struct Core {
    int32_t len = 0;
    std::vector<uint64_t> ring;       // [window + max_rollback] rows, slot pos % size
    std::vector<uint64_t> comp_ring;  // [ratio + max_rollback] compressor input rows, slot pos % size
    uint64_t partial = 0;             // the compressor's partial block (hash of its rows so far)
    uint64_t chain_last = 0;          // running hash over all compressed rows
  };
  struct SeqState {
    bool live = false;
    Core core;
    std::vector<uint64_t> comp_chain;  // [len / ratio] running hash after each compressed row
    std::vector<int32_t> tokens;       // history, kept only to replay a distant copy_prefix
    bool draft_valid = false;          // `draft` continues `core` (discarded by forward/truncate)
    Core draft;
  };

  Core empty_core() const;
  uint64_t summary(const Core& c) const;
  // Feeds one token; returns true when it completed a compressed row (c.chain_last moved).
  bool step(Core& c, int32_t token) const;
  void feed(SeqState& s, int32_t token);
  void rebuild_partial(Core& c) const;
  void logits_row(uint64_t seed, float* row) const;
  Status check_slot(SeqSlot seq, const char* what) const;

  FakeModelOptions opt_;
  RunnerInfo info_;
  std::vector<SeqState> seqs_;
  int32_t live_ = 0;
  int64_t forward_tokens_ = 0;
  int64_t forward_calls_ = 0;
  int64_t replayed_tokens_ = 0;
  int64_t budget_bytes_ = 0;  // 0 = unlimited
  int64_t refused_forwards_ = 0;
  int64_t refused_copies_ = 0;
};

}  // namespace dsv4::testing
