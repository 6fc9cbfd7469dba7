// io: a file's bytes in memory, read-only. Two residencies: a lazy read-only file mapping (no byte is
// read until touched; the page cache holds the data, 4 KiB pages), optionally populated at open so later
// reads never fault; or a private copy in anonymous memory on 2 MiB huge pages (fewer TLB misses when
// the bytes are streamed every decode step), read with pread and dropped from the page cache as it goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "core/host_memory.h"
#include "core/status.h"

namespace dsv4 {

// How a checkpoint's bytes are resident. kAuto is resolved by the checkpoint loader (safetensors.h).
enum class Residency : uint8_t { kMmap, kCopy, kAuto };
const char* residency_name(Residency r);
bool parse_residency(std::string_view text, Residency* out);

struct FileLoadOptions {
  Residency residency = Residency::kMmap;  // kMmap or kCopy (kAuto is an error here)
  bool populate = false;                   // kMmap: fault every page in at open (MADV_POPULATE_READ)
  uint64_t chunk_bytes = 64ull << 20;      // kCopy: pread size; each chunk read is dropped from the cache
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
  Residency residency() const { return residency_; }

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  Residency residency_ = Residency::kMmap;
  PageMemory copy_;  // kCopy: owns data_; kMmap: empty and data_ is a file mapping
};

}  // namespace dsv4
