// runtime: the synchronous heart of the engine. Owns the sequences, the paged pool, the prefix cache
// and the runner; step() = schedule -> (draft) -> forward(batch) -> sample/verify -> postprocess.
// No threads here: EngineImpl drives it from its loop thread, tests drive it directly.
#pragma once

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "dsv4/engine.h"
#include "runtime/block_pool.h"
#include "runtime/detokenizer.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "runtime/speculative.h"
#include "runtime/stop_matcher.h"

namespace dsv4 {

struct EngineCoreOptions {
  int32_t max_batch_tokens = 256;  // tokens per forward (prefill chunks + decodes + verify tokens);
                                   // must be >= 1 + speculative_k
  int32_t max_running = 64;        // sequences holding runner state at once
  int32_t block_tokens = 16;
  int64_t pool_bytes = int64_t{1} << 30;  // state budget: admission's pool (unless pool_blocks > 0) and
                                          // the runner's real memory (unless runner_budget_bytes >= 0)
  int32_t pool_blocks = 0;                // explicit pool size in blocks (tests)
  // The runner's real state budget (ModelRunner::set_state_budget): -1 = pool_bytes, or unlimited when
  // pool_blocks > 0; 0 = unlimited. A forward it refuses preempts sequences and is retried.
  int64_t runner_budget_bytes = -1;
  int32_t speculative_k = 0;              // MTP draft tokens per step (0 = off)
  int32_t prefix_cache_entries = 0;       // finished sequences kept for prefix reuse (0 = off)
  uint64_t default_seed = 0x5eed;         // seeds requests without a seed (mixed with the request id)
};

// One scheduled piece of work for a step (exposed for tests of the scheduler).
struct ScheduledSeq {
  RequestId id = 0;
  int32_t n_tokens = 0;  // tokens fed this step (prefill chunk, 1 decode, or 1 + drafts)
  int32_t n_drafts = 0;
};

struct CoreStats {
  int64_t steps = 0;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t forward_tokens = 0;
  int64_t preemptions = 0;
  int64_t forward_retries = 0;  // forwards the runner refused for memory, retried after preempting
  int64_t prefix_hits = 0;
  int64_t prefix_hit_tokens = 0;
  SpecStats spec;
};

class EngineCore {
 public:
  EngineCore(ModelRunner* runner, const Detokenizer* detokenizer, EngineCoreOptions options);
  ~EngineCore();
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  // Request checks that need no engine state: empty prompt, ids outside the vocab, bad sampling
  // values (kInvalidArgument); prompt + max_tokens beyond the context or the whole pool (kOutOfRange).
  Status validate(const GenerationRequest& request) const;
  // Queues a validated request; updates are delivered through `on_update` from step()/cancel().
  Status add(RequestId id, GenerationRequest request, UpdateCallback on_update);
  // Finishes the request with kCancelled and returns all its state now. Unknown ids are ignored.
  void cancel(RequestId id);
  // Ends every request with kCancelled (shutdown).
  void cancel_all();

  // One engine step. A runner failure ends the sequences of that batch with kError and is returned.
  Status step();
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }

  int64_t n_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t n_running() const { return static_cast<int64_t>(running_.size()); }
  const BlockPool& pool() const { return pool_; }
  const PoolPlan& plan() const { return plan_; }
  const CoreStats& stats() const { return stats_; }
  int32_t prefix_cache_size() const { return static_cast<int32_t>(donors_.size()); }
  // Drops every cached prefix (their blocks and runner state return to the pools).
  void clear_prefix_cache();
  // The work of the last step, in batch order.
  const std::vector<ScheduledSeq>& last_schedule() const { return last_schedule_; }
  // Bytes of state held by live sequences and cached prefixes, by kind; their checkpoints apart.
  StateFootprint bytes_in_use() const;
  int64_t checkpoint_bytes_in_use() const;

 private:
  struct Sequence;
  struct Donor;

  void schedule(std::vector<Sequence*>* batch);
  bool plan_work(const Sequence& s, int32_t budget, int32_t* n, int32_t* k) const;
  bool ensure_blocks(Sequence& s, int32_t n_tokens_total);
  bool make_room(int32_t blocks_needed, const Sequence* keep);
  void preempt(Sequence& s);
  bool admit(Sequence& s);
  void draft_tokens(const std::vector<Sequence*>& batch);
  Status run_forward(const std::vector<Sequence*>& batch, std::vector<float>* logits);
  // run_forward, freeing memory (cached prefixes, then the youngest sequences) while the runner
  // refuses the batch for memory; preempted sequences leave `batch`.
  Status forward_with_retry(std::vector<Sequence*>* batch);
  void postprocess(Sequence& s, const float* logits_rows);
  // Emits one generated token; returns false when the sequence finished on it.
  bool emit_token(Sequence& s, int32_t token, const float* logits_row, GenerationUpdate* update);
  std::string end_text(Sequence& s);
  void finish(Sequence& s, FinishReason reason, GenerationUpdate* update, Status error = Status::ok());
  void release_state(Sequence& s, bool donate);
  void lookup_prefix(Sequence& s);
  void evict_donor();
  uint64_t block_hash(uint64_t prev, const int32_t* tokens) const;

  ModelRunner* runner_;
  const Detokenizer* detok_;
  EngineCoreOptions opt_;
  RunnerInfo info_;
  PoolPlan plan_;
  BlockPool pool_;

  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  std::deque<Sequence*> waiting_;  // FCFS; preempted sequences go back to the front
  std::vector<Sequence*> running_; // admission order (oldest first)
  int64_t admit_counter_ = 0;

  std::list<std::unique_ptr<Donor>> donors_;  // LRU: front = most recently used
  std::unordered_multimap<uint64_t, Donor*> donor_index_;  // block-chain hash -> donor

  std::vector<ScheduledSeq> last_schedule_;
  CoreStats stats_;
  std::vector<float> logits_;  // [n_logits, vocab] of the current step
  std::vector<float> scratch_;
};

}  // namespace dsv4
