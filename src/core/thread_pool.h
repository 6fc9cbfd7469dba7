// core: one persistent pool of worker threads for the whole engine. parallel_for cuts a range into
// fixed chunks (multiples of `grain`) that the calling thread and the workers claim from an atomic
// cursor, so a worker descheduled on a shared machine delays the step by at most the chunk it holds.
// Which thread computes a chunk varies; the chunk boundaries do not depend on timing, and kernels
// that compute each output inside one grain are bit-identical for every thread count and schedule.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <thread>
#include <type_traits>
#include <vector>

namespace dsv4 {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread, which always takes part: a pool of 1 starts no workers.
  // 0 means "one per CPU the calling thread may run on" (its affinity mask: taskset, a cpuset).
  // `thread_cpus` (optional, core/numa.h's NumaPlan::thread_cpus): [n_threads] CPU lists; worker i (1..n_threads-1) is pinned to thread_cpus[i] at construction, and
  // a thread calling parallel_for is pinned to thread_cpus[0] on its first call (the caller takes part
  // in every job, so it belongs on a node too). An empty list leaves that thread unpinned. A pin the OS
  // refuses is counted (pin_failures) and leaves the thread unpinned: placement is an optimisation.
  explicit ThreadPool(int n_threads = 0, std::vector<std::vector<int>> thread_cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }
  // Workers the OS refused to pin (the caller's pin is not counted: it happens on its first call).
  int pin_failures() const { return pin_failures_; }
  // The worker threads' CPU-time clocks (pthread_getcpuclockid; the calling thread's own is
  // CLOCK_THREAD_CPUTIME_ID), for a profiler that sums the CPU time a job took over the pool (read by
  // another thread, such a clock includes a running worker's time up to the read, which the process
  // clock CLOCK_PROCESS_CPUTIME_ID does not promise). A worker whose clock the OS does not give is left out.
  const std::vector<clockid_t>& worker_cpu_clocks() const { return worker_clocks_; }

  // Calls fn(begin, end, slot) for every chunk of [0, n) and blocks until all are done. Chunk
  // boundaries are multiples of `grain` (except the end of the range); see chunk_grains(). `slot` in
  // [0, n_slots(n, grain)) names the thread running the chunk within this call: the caller is slot 0
  // and runs the first chunk; one slot may run several chunks, one after the other, never two at once,
  // so per-slot scratch needs no lock (and per-slot partial results must be accumulated, not assigned).
  // Not reentrant: a parallel_for issued from inside a chunk runs serially on the calling thread.
  // No allocation: fn is called through a plain function pointer and a pointer to the caller's lambda.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    auto trampoline = [](void* ctx, int64_t b, int64_t e, int slot) { (*static_cast<F*>(ctx))(b, e, slot); };
    run(n, grain, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Grains per chunk for n items: about kChunksPerThread chunks per thread, so a late thread leaves
  // little for the others to wait on, while a small decode GEMV still takes few claims.
  int64_t chunk_grains(int64_t n, int64_t grain) const;
  // How many distinct slots (threads) parallel_for(n, grain, ...) may use: min(n_threads, chunks).
  // 1 means the call runs inline on the caller.
  int n_slots(int64_t n, int64_t grain) const;

  static constexpr int kChunksPerThread = 4;

  // Testing: called on the claiming thread before each chunk with (slot, chunk index), so a test can
  // delay chosen threads and force uneven schedules. nullptr (the default) costs one load per chunk.
  using ChunkHook = void (*)(int slot, int64_t chunk);
  void set_chunk_hook_for_testing(ChunkHook hook) { chunk_hook_.store(hook, std::memory_order_relaxed); }

 private:
  using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int slot);
  void run(int64_t n, int64_t grain, TaskFn fn, void* ctx);
  void worker_loop();
  // Claims and runs chunks until a claim misses. `slot` belongs to job `job` (−1/−1: none yet); a claim
  // that lands in another job (this thread was still claiming when the caller published the next one)
  // takes a fresh slot there, since the old number may already be another thread's.
  void drain(int slot, uint32_t job);
  void run_chunk(int64_t c, int slot);
  void wait_all_done(uint32_t total);

  void pin_caller();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::vector<clockid_t> worker_clocks_;
  std::vector<int> caller_cpus_;  // empty: the caller is not pinned
  uint64_t id_ = 0;               // unique per pool: which pool a caller thread was last pinned for
  int pin_failures_ = 0;
  // The current job, written by the caller before it publishes `claim_` (release); a thread reads it
  // only after claiming a chunk, and the caller changes it only once every claimed chunk is done.
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, chunk_len_ = 1;
  // [job : 24 | total chunks : 20 | next chunk : 20]. fetch_add claims; a claim at or past `total` is a
  // miss (at most one per thread and job, so `next` cannot carry into `total`).
  alignas(64) std::atomic<uint64_t> claim_{0};
  uint32_t job_ = 0;  // the caller's job counter (the claim word's low 24 bits of it)
  alignas(64) std::atomic<uint32_t> done_{0};        // chunks finished in the current job
  std::atomic<uint32_t> caller_asleep_{0};           // the caller blocks on done_ (workers must wake it)
  std::atomic<int> next_slot_{1};                    // slot for the next worker that claims a chunk
  alignas(64) std::atomic<uint32_t> generation_{0};  // bumped once per job: wakes the workers
  std::atomic<uint32_t> sleepers_{0};                // workers blocked on generation_
  std::atomic<bool> stop_{false};
  std::atomic<ChunkHook> chunk_hook_{nullptr};
};

}  // namespace dsv4
