// runtime: the paged state pool. Fixed-size blocks with reference counts; each sequence holds a block
// table (ids) covering its per-sequence state (window rings, compressor partials) and its per-token
// state (compressed rows, indexer keys) in blocks of `block_tokens` tokens. The pool is sized from a
// byte budget and the model's bytes per token of each state kind (StateFootprint).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runtime/model_runner.h"

namespace dsv4 {

class BlockPool {
 public:
  explicit BlockPool(int32_t n_blocks);

  int32_t total() const { return static_cast<int32_t>(refs_.size()); }
  int32_t free_count() const { return static_cast<int32_t>(free_.size()); }

  // All `n` blocks or none: kResourceExhausted leaves the pool unchanged.
  Status allocate(int32_t n, std::vector<int32_t>* out);
  void retain(int32_t id);   // one more owner (a shared prefix block)
  void release(int32_t id);  // back to the free list when the last owner lets go
  void release_all(std::vector<int32_t>* ids);
  int32_t refcount(int32_t id) const;

 private:
  std::vector<int32_t> refs_;
  std::vector<int32_t> free_;  // LIFO: recently freed blocks are reused first
};

// How a byte budget becomes blocks. A sequence of n tokens holds seq_blocks + ceil(n / block_tokens),
// plus checkpoint_blocks for each prefix-reuse checkpoint it keeps (one per checkpoint_interval tokens).
struct PoolPlan {
  int32_t block_tokens = 0;
  int64_t block_bytes = 0;  // block_tokens x per-token bytes (at least 1)
  int32_t seq_blocks = 0;   // blocks charged once per sequence for its fixed-size state
  int32_t n_blocks = 0;
  int32_t checkpoint_interval = 0;  // 0: no checkpoints
  int32_t checkpoint_blocks = 0;
  int64_t checkpoint_bytes = 0;
  StateFootprint footprint;

  int64_t checkpoints_for(int64_t n_tokens) const { return checkpoint_interval > 0 ? n_tokens / checkpoint_interval : 0; }
  int32_t blocks_for(int64_t n_tokens) const {
    return seq_blocks + static_cast<int32_t>((n_tokens + block_tokens - 1) / block_tokens) +
           static_cast<int32_t>(checkpoints_for(n_tokens)) * checkpoint_blocks;
  }
  // Bytes a sequence of n tokens holds, checkpoints included (exact, not rounded to blocks).
  int64_t bytes_for(int64_t n_tokens) const {
    return footprint.per_seq() + footprint.per_token() * n_tokens + checkpoints_for(n_tokens) * checkpoint_bytes;
  }
};

// kInvalidArgument when the budget cannot hold even one block or block_tokens < 1. `checkpoint_interval`
// and `checkpoint_bytes` come from RunnerInfo (0: the runner keeps no checkpoints).
Result<PoolPlan> plan_pool(const StateFootprint& footprint, int64_t budget_bytes, int32_t block_tokens,
                           int32_t checkpoint_interval = 0, int64_t checkpoint_bytes = 0);

}  // namespace dsv4
