// core: the persistent thread pool. Workers wait on a generation counter (spin briefly, then block in
// std::atomic::wait) so a decode step's many small dispatches cost microseconds, while idle workers on
// a shared machine sleep instead of burning a core.
#include "core/thread_pool.h"

#include <algorithm>

#include "core/check.h"

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
// ~tens of microseconds of polling before sleeping: long enough to bridge back-to-back kernel launches.
constexpr int kSpinIterations = 4000;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  n_threads_ = n_threads;
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::chunk_range(int64_t n, int64_t grain, int n_chunks, int c, int64_t* begin, int64_t* end) {
  const int64_t n_grains = (n + grain - 1) / grain;
  const int64_t base = n_grains / n_chunks, extra = n_grains % n_chunks;
  // The first `extra` chunks take one grain more.
  const int64_t g0 = c * base + std::min<int64_t>(c, extra);
  const int64_t g1 = g0 + base + (c < extra ? 1 : 0);
  *begin = std::min(n, g0 * grain);
  *end = std::min(n, g1 * grain);
}

int ThreadPool::n_chunks(int64_t n, int64_t grain) const {
  if (n <= 0) return 0;
  const int64_t n_grains = (n + grain - 1) / grain;
  return static_cast<int>(std::min<int64_t>(n_threads_, n_grains));
}

void ThreadPool::run_chunk(int c) {
  int64_t b = 0, e = 0;
  chunk_range(n_, grain_, job_chunks_, c, &b, &e);
  if (b < e) fn_(ctx_, b, e, c);
}

void ThreadPool::run(int64_t n, int64_t grain, TaskFn fn, void* ctx) {
  DSV4_CHECK(grain >= 1, "parallel_for grain must be >= 1");
  if (n <= 0) return;
  const int chunks = n_chunks(n, grain);
  if (chunks == 1 || t_in_chunk) {
    const bool was = t_in_chunk;
    t_in_chunk = true;
    fn(ctx, 0, n, 0);
    t_in_chunk = was;
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain;
  job_chunks_ = chunks;
  // Every worker takes part in every generation (those without a chunk just acknowledge), so
  // `pending_` counts all workers.
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_release);
  generation_.notify_all();

  t_in_chunk = true;
  run_chunk(0);
  t_in_chunk = false;

  for (int spin = 0; pending_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpinIterations) {
      DSV4_CPU_RELAX();
    } else {
      const int p = pending_.load(std::memory_order_acquire);
      if (p != 0) pending_.wait(p, std::memory_order_acquire);
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t g = generation_.load(std::memory_order_acquire);
    for (int spin = 0; g == seen; ++spin) {
      if (spin < kSpinIterations) {
        DSV4_CPU_RELAX();
      } else {
        generation_.wait(seen, std::memory_order_acquire);
      }
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    if (index < job_chunks_) {
      t_in_chunk = true;
      run_chunk(index);
      t_in_chunk = false;
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace dsv4
