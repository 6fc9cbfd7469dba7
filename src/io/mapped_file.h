// io: a file's bytes in memory, read-only. Two residencies: a read-only file mapping (lazy: no byte is
// read until touched; or populated at open so later reads do not fault, and optionally locked so the
// kernel cannot reclaim them), or a private copy in anonymous memory on 2 MiB huge pages (fewer TLB misses
// when the bytes are streamed every decode step; never reclaimed without swap), read with pread and
// dropped from the page cache as it goes. Which one a checkpoint gets is io/residency_policy.h's call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/host_memory.h"
#include "core/status.h"

namespace dsv4 {

// How a checkpoint's bytes are resident. kAuto is resolved to one of the others by decide_residency
// (io/residency_policy.h) before any file is opened; MappedFile::open refuses it.
enum class Residency : uint8_t { kMmap, kCopy, kAuto };
const char* residency_name(Residency r);
bool parse_residency(std::string_view text, Residency* out);

struct FileLoadOptions {
  Residency residency = Residency::kMmap;
  bool populate = false;                   // kMmap: fault every page in at open (MADV_POPULATE_READ)
  // kMmap with populate: mlock the mapping after populating it, so reclaim cannot take its pages. A
  // refusal (limit, no memory) is a note, not an error: the mapping stays as populated.
  bool lock = false;
  uint64_t chunk_bytes = 64ull << 20;      // kCopy: pread size; each chunk read is dropped from the cache
  // NUMA placement of the bytes (core/numa.h): the copy's pages are bound with mbind before they are
  // written; a populating mapping reads its page-cache folios under the same policy as the calling
  // thread's (folios the page cache already holds stay on their node). Default: the kernel's first touch.
  MemoryPlacement placement;
};

class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::filesystem::path& path, const FileLoadOptions& options = {});
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  uint64_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }
  Residency residency() const { return residency_; }  // kMmap or kCopy, as it turned out
  // Empty, or why FileLoadOptions::placement could not be applied (a kernel or sandbox without NUMA).
  const std::string& placement_note() const { return placement_note_; }
  bool locked() const { return locked_; }  // kMmap: mlocked at open
  const std::string& lock_note() const { return lock_note_; }  // why FileLoadOptions::lock failed, or empty
  // Bytes of the file in memory now: all of a copy; the pages of a mapping the page cache holds (mincore),
  // which falls when the kernel reclaims them. nullopt where mincore fails.
  std::optional<uint64_t> resident_bytes() const;

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  Residency residency_ = Residency::kMmap;
  std::string placement_note_;
  bool locked_ = false;
  std::string lock_note_;
  PageMemory copy_;  // kCopy: owns data_; kMmap: empty and data_ is a file mapping
};

}  // namespace dsv4
