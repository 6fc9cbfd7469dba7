// kernels: the read-bandwidth probe. Uses baseline SSE2 loads (4 independent 16-byte accumulators, 64 B
// per iteration): one core issues loads far faster than DRAM delivers them, so the ISA does not limit
// the figure and the probe runs on every x86-64 CPU.
#include "kernels/cpu/read_probe.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace dsv4::kernels {
namespace {

uint64_t sum_words(const uint64_t* p, int64_t n) {
  int64_t i = 0;
  uint64_t total = 0;
#if defined(__x86_64__)
  __m128i a0 = _mm_setzero_si128(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 8 <= n; i += 8) {
    a0 = _mm_add_epi64(a0, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i)));
    a1 = _mm_add_epi64(a1, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 2)));
    a2 = _mm_add_epi64(a2, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 4)));
    a3 = _mm_add_epi64(a3, _mm_load_si128(reinterpret_cast<const __m128i*>(p + i + 6)));
  }
  alignas(16) uint64_t lanes[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(lanes),
                  _mm_add_epi64(_mm_add_epi64(a0, a1), _mm_add_epi64(a2, a3)));
  total = lanes[0] + lanes[1];
#endif
  for (; i < n; ++i) total += p[i];
  return total;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

int64_t parse_cache_size(const std::string& s) {
  // sysfs writes e.g. "491520K".
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (v <= 0) return 0;
  if (end && (*end == 'K' || *end == 'k')) return v * 1024;
  if (end && (*end == 'M' || *end == 'm')) return v * 1024 * 1024;
  return v;
}

}  // namespace

int64_t last_level_cache_bytes() {
  int64_t best = 0;
  for (int idx = 0; idx < 8; ++idx) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size");
    std::string s;
    if (f >> s) best = std::max(best, parse_cache_size(s));
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  if (best == 0) best = std::max<int64_t>(0, sysconf(_SC_LEVEL3_CACHE_SIZE));
#endif
  return best;
}

uint64_t read_sum(const uint64_t* data, int64_t n_words, ThreadPool* pool) {
  if (pool == nullptr) return sum_words(data, n_words);
  std::vector<uint64_t> partial(static_cast<size_t>(pool->n_threads()), 0);
  // Grain of 8 words keeps every chunk 64-byte aligned. A slot may run several chunks: accumulate
  // (wrapping uint64 addition, so the checksum does not depend on the schedule).
  pool->parallel_for(n_words, 8, [&](int64_t b, int64_t e, int slot) {
    partial[static_cast<size_t>(slot)] += sum_words(data + b, e - b);
  });
  uint64_t total = 0;
  for (uint64_t p : partial) total += p;
  return total;
}

Result<ReadProbeResult> run_read_probe(int64_t bytes, int passes, ThreadPool* pool, PageKind pages,
                                       const MemoryPlacement& placement) {
  if (bytes < 64 || passes < 1)
    return invalid_argument("read_probe.size", "the read probe needs at least 64 bytes and one pass, got " +
                                                   std::to_string(bytes) + " bytes, " + std::to_string(passes) + " passes");
  const int64_t n_words = bytes / 8 / 8 * 8;
  DSV4_ASSIGN_OR_RETURN(PageMemory mem, PageMemory::allocate(static_cast<uint64_t>(n_words) * 8, pages));
  (void)mem.place(placement);  // not applied (no NUMA here): first touch, as without a placement
  auto* data = reinterpret_cast<uint64_t*>(mem.data());
  // Fault the pages in from the threads that will read them (first touch places them on their node).
  auto fill = [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) data[i] = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
  };
  if (pool) {
    pool->parallel_for(n_words, 8, fill);
  } else {
    fill(0, n_words, 0);
  }
  ReadProbeResult r;
  r.bytes = n_words * 8;
  r.passes = passes;
  r.pages = pages;
  r.huge_page_bytes = anon_huge_bytes_at(data);
  r.checksum = read_sum(data, n_words, pool);  // warm-up
  double sum_gbps = 0;
  for (int p = 0; p < passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = process_cpu_seconds();
    r.checksum ^= read_sum(data, n_words, pool);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = process_cpu_seconds() - c0;
    const double gbps = static_cast<double>(r.bytes) / s / 1e9;
    r.best_gbps = std::max(r.best_gbps, gbps);
    if (cpu > 0) r.best_cpu_gbps = std::max(r.best_cpu_gbps, static_cast<double>(r.bytes) / cpu / 1e9);
    sum_gbps += gbps;
  }
  r.mean_gbps = sum_gbps / passes;
  return r;
}

}  // namespace dsv4::kernels
