// io: a file's bytes in memory, read-only. Two residencies: a read-only file mapping (lazy: no byte is
// read until touched; or populated at open so later reads never fault — on 2 MiB PMD mappings where the
// page cache holds the file in 2 MiB folios), or a private copy in anonymous memory on 2 MiB huge pages
// (fewer TLB misses when the bytes are streamed every decode step), read with pread and dropped from the
// page cache as it goes. kAuto per file: the populated mapping when it came out on huge pages, else a copy.
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

// How a checkpoint's bytes are resident. For a checkpoint, kAuto is first resolved by the loader
// (safetensors.h: does it fit?); for one file it means "huge pages, by the cheapest route" (above).
enum class Residency : uint8_t { kMmap, kCopy, kAuto };
const char* residency_name(Residency r);
bool parse_residency(std::string_view text, Residency* out);

struct FileLoadOptions {
  Residency residency = Residency::kMmap;
  bool populate = false;                   // kMmap: fault every page in at open (MADV_POPULATE_READ)
  uint64_t chunk_bytes = 64ull << 20;      // kCopy: pread size; each chunk read is dropped from the cache
  // kAuto: keep the populated mapping when at least this share of it is PMD-mapped, else copy. Below
  // 2 MiB nothing can be PMD-mapped, so small files are copied.
  double min_huge_share = 0.9;
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

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  Residency residency_ = Residency::kMmap;
  std::string placement_note_;
  PageMemory copy_;  // kCopy: owns data_; kMmap: empty and data_ is a file mapping
};

}  // namespace dsv4
