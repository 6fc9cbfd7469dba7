// core: the persistent thread pool. A job is published as a chunk cursor plus a generation bump;
// workers spin on the generation for a short while (bridging the back-to-back dispatches of a decode
// step), then block on a futex, so idle workers on a shared machine sleep instead of burning a core.
// The caller only enters the kernel to wake workers when one is really asleep.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/numa.h"
#include "core/scratch.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DSV4_CPU_RELAX() _mm_pause()
#else
#define DSV4_CPU_RELAX() \
  do {                   \
  } while (0)
#endif

namespace dsv4 {
namespace {

// Set while a thread runs a chunk: a nested parallel_for then runs inline instead of deadlocking.
thread_local bool t_in_chunk = false;
// The id of the pool this thread was last pinned for as a caller (0: none), so the pin costs one
// syscall per caller thread, not one per job.
thread_local uint64_t t_pinned_for = 0;
std::atomic<uint64_t> g_next_pool_id{1};

// How long a worker polls for the next job before it blocks, and how long the caller polls for the
// last chunks before it blocks. A decode step issues its dispatches microseconds apart, so this bridges
// them without a syscall; between steps (sampling, the server) workers fall asleep quickly.
constexpr int64_t kSpinNs = 50'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Polls until done() or the spin time is over; true if done. Reads the clock only every 64 pauses (a
// pause is ~10–140 cycles depending on the CPU, so an iteration count would not be a time).
template <typename Done>
bool spin_until(Done done) {
  const int64_t t0 = now_ns();
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      DSV4_CPU_RELAX();
    }
    if (now_ns() - t0 > kSpinNs) return false;
  }
}

bool spin_until_changed(const std::atomic<uint32_t>& word, uint32_t old) {
  return spin_until([&] { return word.load(std::memory_order_acquire) != old; });
}

// Blocks while word == old (spurious returns allowed: callers loop).
void futex_wait(std::atomic<uint32_t>& word, uint32_t old) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
#else
  word.wait(old, std::memory_order_acquire);
#endif
}

void futex_wake_all(std::atomic<uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

constexpr int kFieldBits = 20;
constexpr uint64_t kFieldMask = (uint64_t{1} << kFieldBits) - 1;
constexpr uint64_t kJobMask = (uint64_t{1} << 24) - 1;

constexpr uint64_t pack_claim(uint32_t job, uint32_t total, uint32_t next) {
  return ((job & kJobMask) << (2 * kFieldBits)) | (uint64_t{total} << kFieldBits) | next;
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, std::vector<std::vector<int>> thread_cpus) {
  // "One per available CPU" counts the CPUs this thread may run on (taskset, a container's cpuset), not
  // the machine's: more threads than allowed CPUs would time-share them and every join would wait.
  if (n_threads <= 0) {
    const size_t allowed = current_thread_cpus().size();
    n_threads = allowed > 0 ? static_cast<int>(allowed) : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  }
  n_threads_ = n_threads;
  DSV4_CHECK(thread_cpus.empty() || thread_cpus.size() == static_cast<size_t>(n_threads_),
             "ThreadPool: thread_cpus must name one CPU list per thread");
  id_ = g_next_pool_id.fetch_add(1, std::memory_order_relaxed);
  if (!thread_cpus.empty()) caller_cpus_ = thread_cpus[0];
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) {
    workers_.emplace_back([this] { worker_loop(); });
    const auto& cpus = thread_cpus.empty() ? caller_cpus_ : thread_cpus[static_cast<size_t>(i)];
    if (!thread_cpus.empty() && !cpus.empty() && !pin_thread(workers_.back(), cpus)) ++pin_failures_;
#if defined(__linux__)
    if (clockid_t c; pthread_getcpuclockid(workers_.back().native_handle(), &c) == 0) worker_clocks_.push_back(c);
#endif
  }
}

void ThreadPool::pin_caller() {
  t_pinned_for = id_;
  (void)pin_current_thread(caller_cpus_);  // refused: the caller stays where it is (see the header)
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  futex_wake_all(generation_);
  for (auto& t : workers_) t.join();
}

int64_t ThreadPool::chunk_grains(int64_t n, int64_t grain) const {
  if (n <= 0) return 1;
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t target = int64_t{n_threads_} * kChunksPerThread;
  return std::max<int64_t>(1, (n_grains + target - 1) / target);
}

int ThreadPool::n_slots(int64_t n, int64_t grain) const {
  if (n <= 0) return 0;
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t chunks = (n_grains + chunk_grains(n, grain) - 1) / chunk_grains(n, grain);
  return static_cast<int>(std::min<int64_t>(n_threads_, chunks));
}

void ThreadPool::run_chunk(int64_t c, int slot) {
  if (const ChunkHook hook = chunk_hook_.load(std::memory_order_relaxed)) hook(slot, c);
  const int64_t b = c * chunk_len_, e = std::min(n_, b + chunk_len_);
  fn_(ctx_, b, e, slot);
}

void ThreadPool::drain(int slot, uint32_t job) {
  for (;;) {
    const uint64_t w = claim_.fetch_add(1, std::memory_order_acq_rel);
    const auto c = static_cast<uint32_t>(w & kFieldMask), total = static_cast<uint32_t>((w >> kFieldBits) & kFieldMask);
    const auto w_job = static_cast<uint32_t>(w >> (2 * kFieldBits));
    if (c >= total) return;
    // Claimed: the job's fields are stable until done_ counts this chunk, and next_slot_ is this job's.
    if (slot < 0 || w_job != job) {
      slot = next_slot_.fetch_add(1, std::memory_order_relaxed);
      job = w_job;
    }
    t_in_chunk = true;
    run_chunk(c, slot);
    t_in_chunk = false;
    // seq_cst pairs with the caller's caller_asleep_ store and re-check in wait_all_done.
    if (done_.fetch_add(1, std::memory_order_seq_cst) + 1 == total &&
        caller_asleep_.load(std::memory_order_seq_cst) != 0)
      futex_wake_all(done_);
  }
}

void ThreadPool::wait_all_done(uint32_t total) {
  auto all_done = [&] { return done_.load(std::memory_order_acquire) == total; };
  if (all_done() || spin_until(all_done)) return;  // the first test reads no clock
  // A worker holding the last chunk was descheduled: sleep instead of competing with it for a core.
  caller_asleep_.store(1, std::memory_order_seq_cst);
  for (uint32_t d; (d = done_.load(std::memory_order_seq_cst)) != total;) futex_wait(done_, d);
  caller_asleep_.store(0, std::memory_order_relaxed);
}

void ThreadPool::run(int64_t n, int64_t grain, TaskFn fn, void* ctx) {
  DSV4_CHECK(grain >= 1, "parallel_for grain must be >= 1");
  if (n <= 0) return;
  if (!caller_cpus_.empty() && t_pinned_for != id_ && !t_in_chunk) pin_caller();
  if (t_in_chunk || n_slots(n, grain) <= 1) {
    const bool was = t_in_chunk;
    t_in_chunk = true;
    fn(ctx, 0, n, 0);
    t_in_chunk = was;
    return;
  }
  const int64_t len = chunk_grains(n, grain) * grain;
  const int64_t n_chunks = (n + len - 1) / len;
  DSV4_CHECK(n_chunks < (int64_t{1} << (kFieldBits - 1)), "parallel_for: too many chunks for the claim word");
  const auto total = static_cast<uint32_t>(n_chunks);
  job_ = static_cast<uint32_t>((job_ + 1) & kJobMask);
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  chunk_len_ = len;
  done_.store(0, std::memory_order_relaxed);
  next_slot_.store(1, std::memory_order_relaxed);
  // Chunk 0 is the caller's: workers claim from 1, so at most total − 1 of them take a slot.
  claim_.store(pack_claim(job_, total, 1), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) != 0) futex_wake_all(generation_);

  t_in_chunk = true;
  run_chunk(0, 0);
  t_in_chunk = false;
  done_.fetch_add(1, std::memory_order_relaxed);
  drain(0, job_);
  wait_all_done(total);
}

void ThreadPool::worker_loop() {
  // Not a load: a pool destroyed before this thread starts has already bumped the generation.
  uint32_t seen = 0;
  for (;;) {
    if (!spin_until_changed(generation_, seen)) {
      // Dekker with run(): either this thread sees the new generation, or the caller sees sleepers_.
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      while (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(generation_, seen);
      sleepers_.fetch_sub(1, std::memory_order_relaxed);
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    drain(-1, 0);
    scratch_follow_steps();  // per-thread buffers the step's chunks grew (core/scratch.h)
  }
}

}  // namespace dsv4
