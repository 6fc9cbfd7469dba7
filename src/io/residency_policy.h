// io: how a checkpoint's bytes are held (--weights), decided from the host's memory facts alone — a pure
// function, so that every edge (the margin line, unknown figures, lock limits) is tested without a host.
//
// Why auto copies whenever the copy fits with margin (measured on the medium model, 10.4 GiB, this VM,
// Linux 6.18, DAMON pageout of unmapped cold memory, no swap): a mapped checkpoint lives in the page cache,
// which the kernel may reclaim (kswapd under pressure; proactive reclaim such as DAMON pageout as soon as
// no process maps it — 10.4 GiB cached → 0 within a minute of the process exiting), so a mapping re-reads
// the file at every load and refaults under pressure; an anonymous copy without swap is never reclaimed
// and sits on 2 MiB pages whatever the page cache's folio size. Decode speed per CPU-second was the same
// on both when the mapping stayed resident; load time is the same disk read either way once the cache is
// cold. So the copy costs nothing here and removes the risk.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "io/mapped_file.h"

namespace dsv4 {

// What the host says, read once at load (host_memory.h); tests write them directly.
struct ResidencyFacts {
  uint64_t checkpoint_bytes = 0;          // all shards' file sizes
  std::optional<uint64_t> mem_available;  // /proc/meminfo MemAvailable; nullopt: unknown
  // Bytes this process may mlock (RLIMIT_MEMLOCK; UINT64_MAX when unlimited or with CAP_IPC_LOCK).
  uint64_t lockable_bytes = 0;
  bool proactive_reclaim = false;  // the kernel pages out cold memory on its own (DAMON pageout)
};

struct ResidencyRequest {
  Residency residency = Residency::kAuto;
  bool populate = false;  // kMmap / auto falling back to a mapping: fault every page in at open
  // "Fits with margin": checkpoint_bytes <= copy_fraction × MemAvailable. 0.75 leaves a quarter of what
  // the kernel could give for the sequences' state pages, activations and the rest of the system
  // (MemAvailable already counts the checkpoint's own page cache, which a copy drops as it reads).
  double copy_fraction = 0.75;
};

struct ResidencyDecision {
  Residency resolved = Residency::kMmap;  // kCopy or kMmap, never kAuto
  bool populate = false;                  // kMmap: MADV_POPULATE_READ at open
  bool lock = false;                      // kMmap: mlock after populating (pages then cannot be reclaimed)
  std::string reason;                     // one line for the load report: why this mode
};

// The policy (--weights):
//   copy: a copy; more than MemAvailable is kResourceExhausted, rule "checkpoint.copy_no_memory".
//   mmap: a mapping, populated when asked and it fits with margin, and then also mlocked when the lock
//         limit covers it (protection from reclaim without a copy).
//   auto: a copy when it fits with margin; else a mapping — populated when it fits in MemAvailable at all
//         (never locked: the kernel keeps a way to reclaim when memory is this tight), lazy when it does
//         not (a checkpoint larger than RAM still runs, paging in on demand) or when MemAvailable is unknown.
Result<ResidencyDecision> decide_residency(const ResidencyRequest& request, const ResidencyFacts& facts);

}  // namespace dsv4
