// core: one persistent pool of worker threads for the whole engine. parallel_for splits a range into
// static, contiguous chunks (one per thread), so which thread computes which output never depends on
// timing; kernels that reduce only within a chunk are bit-identical for every thread count.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace dsv4 {

class ThreadPool {
 public:
  // `n_threads` counts the calling thread, which always runs chunk 0: a pool of 1 starts no workers.
  // 0 means "one per available CPU".
  explicit ThreadPool(int n_threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Calls fn(begin, end, chunk) for every chunk of [0, n). Chunk boundaries are multiples of `grain`
  // (except the end of the range) and there are at most n_threads() chunks; chunk c covers the c-th
  // slice of ceil(n / grain) grains, split as evenly as the grain allows. Blocks until all chunks are done.
  // Not reentrant: a parallel_for issued from inside a chunk runs serially on the calling thread.
  // No allocation: fn is called through a plain function pointer and a pointer to the caller's lambda.
  template <typename Fn>
  void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
    using F = std::remove_reference_t<Fn>;
    auto trampoline = [](void* ctx, int64_t b, int64_t e, int c) { (*static_cast<F*>(ctx))(b, e, c); };
    run(n, grain, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // The chunk [begin, end) that parallel_for gives to chunk c (exposed so tests can check the split).
  static void chunk_range(int64_t n, int64_t grain, int n_chunks, int c, int64_t* begin, int64_t* end);
  // How many chunks parallel_for uses for n items at this grain.
  int n_chunks(int64_t n, int64_t grain) const;

 private:
  using TaskFn = void (*)(void* ctx, int64_t begin, int64_t end, int chunk);
  void run(int64_t n, int64_t grain, TaskFn fn, void* ctx);
  void worker_loop(int index);
  void run_chunk(int c);

  int n_threads_;
  std::vector<std::thread> workers_;
  // The current job; written by the caller before `generation_` is bumped (release), read by workers
  // after they observe the new generation (acquire).
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  int job_chunks_ = 0;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace dsv4
