// tools: helpers shared by the `dsv4 bench` sections (cmd_bench.cc, bench_attention.cc, bench_model.cc):
// the timing loop and the deterministic random source for synthetic weights and activations.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace dsv4::cli::bench {

using Clock = std::chrono::steady_clock;

inline uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A float in [-1, 1) from the stream.
inline float uniform_pm1(uint64_t& s) {
  return static_cast<float>(static_cast<double>(splitmix(s) >> 11) * 0x1.0p-52 - 1.0);
}

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time the calling thread has used: unlike wall time it does not count the time the thread waited
// for a core, so on a shared machine it is the steadier figure for single-threaded work.
inline double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// CPU time of the whole process (every thread): with --threads 1 on a shared machine, tokens per CPU
// second is the figure that does not move with the load.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Runs `step(i)` (i = 0, 1, 2, ...) after one warm-up call until at least `min_time` seconds and
// `min_iters` calls have passed; returns seconds per call.
template <typename Step>
double time_per_call(double min_time, int64_t min_iters, Step step) {
  step(0);  // warm-up
  int64_t iters = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  while (iters < min_iters || elapsed < min_time) {
    step(iters++);
    elapsed = seconds_since(t0);
  }
  return elapsed / static_cast<double>(iters);
}

// Like time_per_call, but returns the fastest single call: on a shared machine the minimum is the
// figure least disturbed by other processes (the attention section compares contexts by ratio).
template <typename Step>
double best_call_time(double min_time, int64_t min_iters, Step step) {
  step(0);  // warm-up
  double best = 1e300;
  const auto t0 = Clock::now();
  for (int64_t iters = 0; iters < min_iters || seconds_since(t0) < min_time; ++iters) {
    const auto t = Clock::now();
    step(iters);
    best = std::min(best, seconds_since(t));
  }
  return best;
}

}  // namespace dsv4::cli::bench
