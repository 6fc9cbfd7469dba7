// model/deepseek_v4: where a forward's time goes, from the calling thread's view — each weight matmul
// dispatch by role (its weight bytes and time, so the bench prints its achieved GB/s) and the serial
// phases between dispatches (attention core, mHC, routing, the rest). Off unless a bench installs a
// DispatchProfile on the thread that calls Model::forward: then each scope boundary reads the wall clock
// and the CPU clocks (below); off, one thread-local load and a null test (serve never installs one).
//
// Time is exclusive: a scope entered inside another stops the outer one's clock until it leaves, so the
// phases of a forward add up to its wall time. Only the installing thread records; pool workers running a
// chunk that calls linear() (the reference backend's per-token experts) see no profile.
//
// CPU time: at each boundary the profile also reads the installing thread's CPU clock plus the clocks it
// was given (Model::worker_cpu_clocks(): the pool's workers), so a phase is charged every CPU-second its
// threads spent while it was current. That includes waiting that spins: a worker polls ~50 µs for the next
// job before it sleeps (core/thread_pool.cc) and the caller polls for the last chunks, so a serial phase
// between dispatches shows up to one spinning worker beside the caller, and cpu / wall near the thread
// count means every thread was on a core, computing or spinning. Time another process takes from the
// threads is in the wall figures and not in these, which is why they A/B better on a shared machine.
// Each boundary costs one clock read per thread (a system call each). read_cost_ns() is what one
// boundary's reads take, measured when the profile is installed (the median of 15) rather than around
// the reads in the run: a system call is where a thread whose time slice ran out gets preempted, so on a
// loaded machine the wall time around the run's reads holds other processes' time too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <vector>

namespace dsv4::v4 {

enum class Phase : int {
  kOther,        // everything no scope names: embedding, block norms, step bookkeeping
  kAttnLinear,   // attention's linears: wq_a/wkv/wq_b/wo_a/wo_b (FP8) with the indexer's and compressors' (BF16)
  kAttnCore,     // the rest of attention: norms, RoPE, FP8 simulation, indexer top-k, compressor state, sparse core
  kMhc,          // the blocks' mHC pre/post mixes (bytes: the mixes' fp32 fn, read once per 8 tokens)
  kMoeGate,      // the MoE gate linear (BF16)
  kMoeRoute,     // sqrt-softplus, top-k, route weights
  kMoeExperts,   // the routed FP4 experts and the FP8 shared expert (one kernels::moe_layer call)
  kHeadLinear,   // the BF16 LM head
  kHeadMix,      // the head's mHC mix and final norm (bytes: its fn)
  kCount,
};

const char* phase_name(Phase p);   // "attn_linear", ...: JSON keys
bool phase_is_matmul(Phase p);     // the weight matmul phases (kMhc and kHeadMix also book their fn bytes)

struct PhaseTotals {
  int64_t ns = 0;      // wall time while the phase was current
  int64_t cpu_ns = 0;  // CPU time of the installing thread and the given worker clocks in that time
  int64_t bytes = 0;   // weight bytes the phase's dispatches read
  int64_t calls = 0;   // dispatches (matmul phases) or scope entries
};

class DispatchProfile {
 public:
  // `worker_clocks`: the other threads whose CPU time a phase is charged (Model::worker_cpu_clocks());
  // none: the installing thread's own only.
  explicit DispatchProfile(std::vector<clockid_t> worker_clocks = {}) : worker_clocks_(std::move(worker_clocks)) {}

  void reset();  // zeroes the totals, keeps the clocks
  const PhaseTotals& totals(Phase p) const { return t_[static_cast<std::size_t>(p)]; }
  int64_t total_ns() const;
  int64_t total_cpu_ns() const;
  // Wall time of one boundary's clock reads (median of 15 at Install): the profile's own cost per boundary.
  int64_t read_cost_ns() const { return read_cost_ns_; }
  int64_t boundaries() const { return boundaries_; }  // Install, every scope entry and exit, uninstall
  int n_clocks() const { return 1 + static_cast<int>(worker_clocks_.size()); }

  // The profile installed on this thread (nullptr: none).
  static DispatchProfile* active();

  // Installs `p` on this thread for the scope's life (nullptr installs nothing); starts the kOther clock.
  class Install {
   public:
    explicit Install(DispatchProfile* p);
    ~Install();
    Install(const Install&) = delete;
    Install& operator=(const Install&) = delete;

   private:
    DispatchProfile* prev_;
  };

  // Charges the time until destruction to `phase` (exclusive of nested scopes), plus `bytes` of weights.
  class Scope {
   public:
    explicit Scope(Phase phase, int64_t bytes = 0) : p_(active()) {
      if (p_) p_->enter(phase, bytes);
    }
    ~Scope() {
      if (p_) p_->leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    DispatchProfile* p_;
  };

  // A weight matmul dispatch inside the current phase: attention's → kAttnLinear, the MoE's → kMoeGate,
  // the head's → kHeadLinear, elsewhere → kOther.
  static Phase matmul_phase();

 private:
  void enter(Phase phase, int64_t bytes);
  void leave();
  int64_t read_cpu() const;  // the installing thread's CPU clock plus the workers'
  void start();   // the clocks' first reading (Install), after timing the reads
  void charge();  // books the time since the last reading to the current phase

  std::vector<clockid_t> worker_clocks_;
  std::array<PhaseTotals, static_cast<std::size_t>(Phase::kCount)> t_{};
  static constexpr int kMaxDepth = 16;
  std::array<Phase, kMaxDepth> stack_{};
  int depth_ = 0;
  int64_t last_ns_ = 0, last_cpu_ns_ = 0;
  int64_t read_cost_ns_ = 0, boundaries_ = 0;
};

}  // namespace dsv4::v4
