// io: a file in memory (POSIX): a read-only file mapping, optionally populated and locked, or a huge-page copy.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14+; older kernels answer EINVAL and we touch the pages instead
#endif

namespace dsv4 {
namespace {

// Closes the descriptor on every path out of open().
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// Reads [0, size) of `fd` into `dst` in chunks; each chunk, once copied, is dropped from the page cache
// so the checkpoint is never held twice (the copy and the cache) — the point of copying when the
// weights barely fit. A file that ends early (truncated while loading) is an io error, never a crash.
Status copy_file(int fd, const std::filesystem::path& path, std::byte* dst, uint64_t size, uint64_t chunk) {
  // Sequential hint: the kernel reads ahead in larger units.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (uint64_t off = 0; off < size;) {
    const uint64_t n = std::min(chunk, size - off);
    uint64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(fd, dst + off + got, n - got, static_cast<off_t>(off + got));
      if (r < 0) {
        const int err = errno;
        if (err == EINTR) continue;
        if (err == ENOMEM || err == EFAULT)
          return resource_exhausted("file.copy_nomem", path.string() + ": out of memory copying the file (" +
                                                           std::strerror(err) + "); use --weights mmap");
        return io_error("file.read", path.string() + ": read failed at byte " + std::to_string(off + got) + ": " +
                                         std::strerror(err));
      }
      if (r == 0)
        return io_error("file.short_read", path.string() + ": file ended at byte " + std::to_string(off + got) +
                                               " of " + std::to_string(size) + " (truncated while loading?)");
      got += static_cast<uint64_t>(r);
    }
    ::posix_fadvise(fd, static_cast<off_t>(off), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
    off += n;
  }
  return Status::ok();
}

// Faults every page of a file mapping in now, so that reads during decode never fault.
Status populate(const std::byte* data, uint64_t size, const std::filesystem::path& path) {
  auto* p = const_cast<std::byte*>(data);
  if (::madvise(p, size, MADV_POPULATE_READ) == 0) return Status::ok();
  const int err = errno;
  if (err != EINVAL)  // EFAULT / EIO: the file shrank under the mapping or the disk failed
    return io_error("file.populate", path.string() + ": populating the mapping failed: " + std::strerror(err));
  // Kernels before 5.14: read one byte per page (the file's size was checked, so every page exists).
  ::madvise(p, size, MADV_WILLNEED);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  volatile std::byte sink{};
  for (uint64_t off = 0; off < size; off += page) sink = data[off];
  (void)sink;
  return Status::ok();
}

}  // namespace

const char* residency_name(Residency r) {
  switch (r) {
    case Residency::kMmap: return "mmap";
    case Residency::kCopy: return "copy";
    case Residency::kAuto: return "auto";
  }
  return "?";
}

bool parse_residency(std::string_view text, Residency* out) {
  for (Residency r : {Residency::kMmap, Residency::kCopy, Residency::kAuto})
    if (text == residency_name(r)) {
      *out = r;
      return true;
    }
  return false;
}

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::filesystem::path& path, const FileLoadOptions& options) {
  if (options.chunk_bytes == 0) return invalid_argument("file.options", "MappedFile::open wants a non-zero chunk");
  if (options.residency == Residency::kAuto)
    return invalid_argument("file.options", "MappedFile::open wants mmap or copy (decide_residency resolves auto)");
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found("file.missing", path.string() + ": no such file");
    return io_error("file.open", path.string() + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd.fd, &st) != 0 || !S_ISREG(st.st_mode)) return io_error("file.not_regular", path.string() + ": not a regular file");
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->residency_ = options.residency == Residency::kCopy ? Residency::kCopy : Residency::kMmap;
  if (f->size_ == 0) return f;
  if (options.residency == Residency::kMmap) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      return io_error("file.mmap", path.string() + ": mmap failed: " + std::strerror(err));
    }
    f->data_ = static_cast<const std::byte*>(p);  // the mapping keeps the file alive after close
    if (!options.populate) return f;
    // Pages the page cache does not hold yet are then read as 2 MiB folios (where the filesystem has
    // large folios) and mapped by PMD: the same TLB reach as a copy, without the copy. Pages already
    // cached on 4 KiB folios (e.g. a file written since boot) stay 4 KiB. Advisory: a refusal only
    // costs speed.
    ::madvise(p, f->size_, MADV_HUGEPAGE);
    {
      const ScopedThreadMemoryPolicy policy(options.placement);
      if (!policy.result().is_ok()) return policy.result().status();
      if (!policy.result()->applied) f->placement_note_ = policy.result()->note;
      DSV4_RETURN_IF_ERROR(populate(f->data_, f->size_, path));
    }
    if (options.lock) {
      // Pinned page-cache folios stay on the unevictable list until munmap: no reclaim, no refault.
      if (::mlock(p, f->size_) == 0) {
        f->locked_ = true;
      } else {
        const int err = errno;
        f->lock_note_ = std::string("mlock failed: ") + std::strerror(err);
      }
    }
    return f;
  }
  auto mem = PageMemory::allocate(f->size_, PageKind::kHuge);
  if (!mem.is_ok())
    return resource_exhausted("file.copy_nomem", path.string() + ": cannot hold a " + mib(f->size_) +
                                                     " copy in memory (" + mem.status().message() + "); use --weights mmap");
  DSV4_ASSIGN_OR_RETURN(const NumaApplied placed, mem->place(options.placement));
  if (!placed.applied) f->placement_note_ = placed.note;
  DSV4_RETURN_IF_ERROR(copy_file(fd.fd, path, mem->data(), f->size_, options.chunk_bytes));
  DSV4_RETURN_IF_ERROR(mem->protect_read_only());
  f->copy_ = std::move(*mem);
  f->data_ = f->copy_.data();
  f->residency_ = Residency::kCopy;
  return f;
}

std::optional<uint64_t> MappedFile::resident_bytes() const {
  if (residency_ == Residency::kCopy || size_ == 0) return size_;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((size_ + page - 1) / page);
  if (::mincore(const_cast<std::byte*>(data_), size_, in_core.data()) != 0) return std::nullopt;
  uint64_t n = 0;
  for (const unsigned char c : in_core) n += c & 1;
  return std::min(n * page, size_);
}

MappedFile::~MappedFile() {
  if (data_ != nullptr && residency_ == Residency::kMmap) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace dsv4
