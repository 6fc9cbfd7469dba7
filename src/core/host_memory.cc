// core: anonymous page memory (mmap + madvise) and /proc memory figures (Linux; unknown elsewhere).
#include "core/host_memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <algorithm>
#include <filesystem>
#include <limits>

namespace dsv4 {
namespace {

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

std::string read_text(const char* path) {
  std::ifstream f(path);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

const char* page_kind_name(PageKind kind) { return kind == PageKind::kHuge ? "huge" : "4k"; }

Result<PageMemory> PageMemory::allocate(uint64_t bytes, PageKind kind) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t align = kind == PageKind::kHuge ? kHugePageBytes : page;
  if (bytes == 0 || bytes > (uint64_t{1} << 56))
    return invalid_argument("memory.anon_size", "anonymous region of " + std::to_string(bytes) + " bytes");
  const uint64_t want = round_up(bytes, align);
  // Over-allocate by one alignment unit, then trim head and tail so the region starts on a 2 MiB
  // boundary: only an aligned 2 MiB range can be backed by one huge page.
  const uint64_t span = want + (align > page ? align : 0);
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    return resource_exhausted("memory.anon_map", "cannot map " + std::to_string(bytes >> 20) +
                                                     " MiB of anonymous memory: " + std::strerror(err));
  }
  auto* base = static_cast<std::byte*>(p);
  const auto addr = reinterpret_cast<uintptr_t>(base);
  auto* start = reinterpret_cast<std::byte*>(round_up(addr, align));
  const uint64_t head = static_cast<uint64_t>(start - base);
  if (head > 0) ::munmap(base, head);
  const uint64_t tail = span - head - want;
  if (tail > 0) ::munmap(start + want, tail);
  // Before the first touch: the fault handler decides the page size at fault time. NOHUGEPAGE on the
  // small kind keeps it on 4 KiB pages also where THP is "always". A refusal (THP compiled out) only
  // costs speed, so it is not an error.
  ::madvise(start, want, kind == PageKind::kHuge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  PageMemory m;
  m.data_ = start;
  m.size_ = bytes;
  m.mapped_ = want;
  m.kind_ = kind;
  return m;
}

PageMemory::~PageMemory() {
  if (data_ != nullptr) ::munmap(data_, mapped_);
}

PageMemory::PageMemory(PageMemory&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)),
      mapped_(std::exchange(o.mapped_, 0)), kind_(o.kind_) {}

PageMemory& PageMemory::operator=(PageMemory&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) ::munmap(data_, mapped_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    kind_ = o.kind_;
  }
  return *this;
}

Result<NumaApplied> PageMemory::place(const MemoryPlacement& placement) {
  if (data_ == nullptr) return NumaApplied{true, ""};
  return bind_memory(data_, mapped_, placement);
}

Status PageMemory::protect_read_only() {
  if (data_ == nullptr) return Status::ok();
  if (::mprotect(data_, mapped_, PROT_READ) != 0) {
    const int err = errno;
    return io_error("memory.protect", std::string("mprotect(PROT_READ) failed: ") + std::strerror(err));
  }
  return Status::ok();
}

std::optional<uint64_t> parse_kb_field(std::string_view text, std::string_view key) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    if (line.starts_with(key)) {
      std::string_view rest = line.substr(key.size());
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      uint64_t v = 0;
      size_t i = 0;
      for (; i < rest.size() && rest[i] >= '0' && rest[i] <= '9'; ++i) v = v * 10 + static_cast<uint64_t>(rest[i] - '0');
      if (i == 0) return std::nullopt;
      return rest.substr(i).starts_with(" kB") ? v * 1024 : v;
    }
    pos = eol + 1;
  }
  return std::nullopt;
}

std::optional<uint64_t> mem_available_bytes() {
  return parse_kb_field(read_text("/proc/meminfo"), "MemAvailable:");
}

uint64_t lockable_bytes() {
  // CapEff is a hex mask; CAP_IPC_LOCK is capability 14.
  const std::string status = read_text("/proc/self/status");
  if (const size_t at = status.find("CapEff:"); at != std::string::npos) {
    const unsigned long long caps = std::strtoull(status.c_str() + at + 7, nullptr, 16);
    if (caps & (1ull << 14)) return std::numeric_limits<uint64_t>::max();
  }
  rlimit lim{};
  if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return 0;
  if (lim.rlim_cur == RLIM_INFINITY) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(lim.rlim_cur);
}

uint64_t process_major_faults() {
  rusage u{};
  if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
  return static_cast<uint64_t>(u.ru_majflt);
}

bool proactive_reclaim_active() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path root = "/sys/kernel/mm/damon/admin/kdamonds";
  for (const auto& k : fs::directory_iterator(root, ec)) {
    if (!k.is_directory(ec) || !read_text((k.path() / "state").c_str()).starts_with("on")) continue;
    for (const auto& c : fs::directory_iterator(k.path() / "contexts", ec)) {
      if (!c.is_directory(ec)) continue;
      for (const auto& s : fs::directory_iterator(c.path() / "schemes", ec))
        if (s.is_directory(ec) && read_text((s.path() / "action").c_str()).starts_with("pageout")) return true;
    }
  }
  return false;
}

HugePageUsage process_huge_pages() {
  const std::string text = read_text("/proc/self/smaps_rollup");
  HugePageUsage u;
  const auto anon = parse_kb_field(text, "AnonHugePages:");
  if (!anon) return u;
  u.known = true;
  u.anon_huge_bytes = *anon;
  u.file_huge_bytes = parse_kb_field(text, "FilePmdMapped:").value_or(0);
  return u;
}

namespace {

std::optional<uint64_t> smaps_field_at(const void* addr, std::string_view key) {
  std::ifstream f("/proc/self/smaps");
  if (!f) return std::nullopt;
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    // A mapping's header line: "start-end perms offset dev inode [path]" (hex addresses).
    unsigned long long lo = 0, hi = 0;
    char dash = 0;
    if (std::sscanf(line.c_str(), "%llx%c%llx", &lo, &dash, &hi) == 3 && dash == '-' && line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.starts_with(key)) return parse_kb_field(line, key);
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> anon_huge_bytes_at(const void* addr) { return smaps_field_at(addr, "AnonHugePages:"); }
std::optional<uint64_t> file_pmd_bytes_at(const void* addr) { return smaps_field_at(addr, "FilePmdMapped:"); }

}  // namespace dsv4
