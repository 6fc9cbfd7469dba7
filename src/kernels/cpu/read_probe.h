// kernels: a STREAM-like read-bandwidth probe — the machine's own ceiling that the bench compares the
// weight-streaming kernels against. Sums 64-bit words over a buffer much larger than the last-level
// cache, split across the thread pool, and keeps the best of several passes. The buffer is
// on 4 KiB pages or on 2 MiB huge pages: the TLB misses of 4 KiB pages cost bandwidth, so an honest
// ceiling is the higher of the two (weights may be on either, core/host_memory.h).
#pragma once

#include <cstdint>
#include <optional>

#include "core/host_memory.h"
#include "core/status.h"

namespace dsv4 {
class ThreadPool;
}

namespace dsv4::kernels {

struct ReadProbeResult {
  double best_gbps = 0;  // 1e9 bytes per second
  double mean_gbps = 0;
  // 1e9 bytes per CPU-second of the process (all threads' CPU time summed), best pass: what the reading
  // threads achieve while they actually hold a core. On a shared, oversubscribed machine the wall figure
  // falls with the load; this one mostly does not, and the bench compares decode's bytes per CPU-second
  // with it.
  double best_cpu_gbps = 0;
  int64_t bytes = 0;  // buffer size
  int passes = 0;
  PageKind pages = PageKind::kSmall;           // what the buffer asked for
  std::optional<uint64_t> huge_page_bytes;     // of the buffer, as the kernel granted them (/proc/self/smaps)
  uint64_t checksum = 0;  // keeps the loads observable (and lets a caller sanity-check the buffer)
};

// Size of the last-level cache in bytes (0 if unknown), from sysfs/sysconf.
int64_t last_level_cache_bytes();

// Reads `bytes` (rounded down to 64) `passes` times after one warm-up pass that also faults the pages in.
// The buffer (anonymous memory of the given page kind) is allocated here and freed before returning.
// bytes < 64 or passes < 1: kInvalidArgument "read_probe.size"; a buffer the kernel will not map:
// PageMemory's kResourceExhausted "memory.anon_map" (a caller sizing the buffer from user input checks
// it against mem_available_bytes() first: a mapping that succeeds may still be OOM-killed when touched).
// `placement` (core/numa.h): where the buffer's pages go; the default is first touch by the pool.
Result<ReadProbeResult> run_read_probe(int64_t bytes, int passes, ThreadPool* pool, PageKind pages = PageKind::kSmall,
                                       const MemoryPlacement& placement = {});

// One multi-threaded read pass over [data, data + n_words): the sum of all words.
uint64_t read_sum(const uint64_t* data, int64_t n_words, ThreadPool* pool);

}  // namespace dsv4::kernels
