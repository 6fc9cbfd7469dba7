// core: host memory at the page level — anonymous regions on 4 KiB pages or on 2 MiB transparent huge
// pages (what the weight copy and the bandwidth probe read), and the OS's memory figures from /proc.
// Decode streams gigabytes of weights per token: on 4 KiB pages that is one TLB miss and page walk per
// 4 KiB, on huge pages one per 2 MiB, which is worth ~20% of achieved bandwidth on the machines we bench.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "core/numa.h"
#include "core/status.h"

namespace dsv4 {

inline constexpr uint64_t kHugePageBytes = 2ull << 20;  // x86-64 PMD-level transparent huge page

enum class PageKind : uint8_t {
  kSmall,  // 4 KiB pages (MADV_NOHUGEPAGE, also where THP is "always")
  kHuge,   // 2 MiB-aligned and MADV_HUGEPAGE before first touch (THP "madvise" or "always")
};
const char* page_kind_name(PageKind kind);

// An anonymous, private, zero-filled mapping; read-write until protect_read_only(). Movable, not copyable.
class PageMemory {
 public:
  // ENOMEM (no address space, or a kernel that refuses the commit) -> kResourceExhausted, rule
  // "memory.anon_map". Nothing is touched here: pages are faulted in by the first write.
  static Result<PageMemory> allocate(uint64_t bytes, PageKind kind);

  PageMemory() = default;
  ~PageMemory();
  PageMemory(PageMemory&& o) noexcept;
  PageMemory& operator=(PageMemory&& o) noexcept;
  PageMemory(const PageMemory&) = delete;
  PageMemory& operator=(const PageMemory&) = delete;

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }  // as requested; the mapping is rounded up to whole pages
  PageKind kind() const { return kind_; }
  // Sets where the pages go when first touched (core/numa.h: interleaved over nodes, or preferring one).
  // Call before writing: pages already faulted in stay where they are. Not applied (a kernel without
  // NUMA, a seccomp filter) is a note, not an error; kDefault does nothing.
  Result<NumaApplied> place(const MemoryPlacement& placement);
  // Makes every page read-only (weights are immutable after load: a stray write faults instead of
  // silently changing the model). kIoError if the kernel refuses.
  Status protect_read_only();

 private:
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;  // bytes of the mapping at data_
  PageKind kind_ = PageKind::kSmall;
};

// /proc/meminfo's MemAvailable (the kernel's estimate of what can be allocated without swapping,
// reclaimable page cache included); nullopt where unknown.
std::optional<uint64_t> mem_available_bytes();

// The process's huge-page-backed resident bytes from /proc/self/smaps_rollup; known = false where the
// file is missing (non-Linux, old kernels).
struct HugePageUsage {
  bool known = false;
  uint64_t anon_huge_bytes = 0;  // AnonHugePages: anonymous THP
  uint64_t file_huge_bytes = 0;  // FilePmdMapped: page-cache huge pages mapped with PMDs
};
HugePageUsage process_huge_pages();

// A field of the one mapping that contains `addr` (/proc/self/smaps), in bytes; nullopt where unknown.
// anon_huge_bytes_at: AnonHugePages (anonymous THP); file_pmd_bytes_at: FilePmdMapped (page-cache folios
// of 2 MiB mapped by one PMD each — a file mapping with huge-page TLB reach).
std::optional<uint64_t> anon_huge_bytes_at(const void* addr);
std::optional<uint64_t> file_pmd_bytes_at(const void* addr);

// Bytes this process may lock in memory (mlock): RLIMIT_MEMLOCK's soft limit, or UINT64_MAX when it is
// unlimited or the process holds CAP_IPC_LOCK (which lifts the limit).
uint64_t lockable_bytes();

// Major page faults of this process so far (getrusage ru_majflt): a fault that had to read from disk.
// Counted across a decode run, a non-zero delta on mapped weights means the kernel reclaimed them.
uint64_t process_major_faults();

// Whether the kernel pages out cold memory on its own: a DAMON kdamond that is on with a pageout scheme
// (/sys/kernel/mm/damon/admin). Page cache a process stops mapping is then gone within minutes.
bool proactive_reclaim_active();

// "<Key>:   1234 kB" → bytes, for the line of `text` that starts with `key` (e.g. "MemAvailable:").
std::optional<uint64_t> parse_kb_field(std::string_view text, std::string_view key);

}  // namespace dsv4
